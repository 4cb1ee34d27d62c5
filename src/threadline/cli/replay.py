"""``threadline replay``: would today's code send the recorded requests byte for byte?"""

from __future__ import annotations

import click

from threadline.cli._common import (
    Context,
    json_option,
    model_option,
    one_line,
    output,
    pass_context,
    table,
)
from threadline.models.scripted import ScriptedModel
from threadline.replay import CallReplay, calls_to_replay, replay

DIFFERS_EXIT = 1  # some request differs (as `conversations verify` exits 1 on damage)


@click.command("replay")
@click.argument("target", metavar="CALL_ID|CONVERSATION")
@model_option("Also send each re-assembled request to this model and say whether its answer "
              "is the recorded one.", default="none: requests are only compared")
@json_option()
@pass_context
def replay_(ctx: Context, target: str, model_name: str | None, as_json: bool) -> None:
    """Check that today's code still sends the recorded requests.

    Re-assembles each recorded request (one call, or every call of a conversation) and
    compares it byte by byte with what was sent: per call, same, or the first differing
    segment with its byte offset, item and field. Exits 1 if any request differs (answers are
    reported, not counted), 3 for an unknown id (docs/replay.md)."""
    model = None if model_name is None else ctx.model(model_name)  # fails before the store
    store = ctx.store()
    calls = calls_to_replay(store, target)
    if store.corpora is not None:
        ctx.corpora()  # retrieved passages are rendered by the retrieval provider
    # the engine is only asked for its assembly; without --model nothing is called
    engine = ctx.engine(model or ScriptedModel())
    results = list(replay(engine, calls, model=model))
    counts = {o: sum(r.outcome == o for r in results) for o in ("same", "differs", "skipped")}
    shown = {"target": target, "calls": [r.to_json() for r in results], **counts}
    if model is not None:
        shown["answers_differ"] = sum(r.answer is not None and not r.answer.same
                                      for r in results)
    output(shown, as_json, lambda: _print(results, counts, model is not None))
    click.get_current_context().exit(DIFFERS_EXIT if counts["differs"] else 0)


def _print(results: list[CallReplay], counts: dict[str, int], answers: bool) -> None:
    rows = []
    for r in results:
        d = r.difference
        row = [r.call.id, r.call.branch, str(r.call.turn), r.call.purpose, r.outcome,
               "-" if d is None else d.segment, "-" if d is None else str(d.byte),
               "-" if d is None or d.seq is None else f"#{d.seq}",
               "-" if d is None else d.field]
        if answers:
            row.append("-" if r.answer is None else "same" if r.answer.same else "different")
        rows.append(row)
    table(rows, ["CALL", "BRANCH", "TURN", "PURPOSE", "REQUEST", "SEGMENT", "BYTE", "ITEM",
                 "FIELD", *(["ANSWER"] if answers else [])])
    for r in results:
        if r.difference is not None:
            click.echo(f"\n{r.call.id}: the {r.difference.segment} segment differs at byte "
                       f"{r.difference.byte} ({r.difference.field})")
            click.echo(f"  recorded: {r.difference.recorded!r}")
            click.echo(f"  today:    {r.difference.replayed!r}")
        elif r.reason is not None:
            click.echo(f"\n{r.call.id}: skipped: {r.reason}")
        if r.answer is not None and not r.answer.same:
            click.echo(f"\n{r.call.id}: the answer differs"
                       + (f" (the model failed: {r.answer.error})" if r.answer.error else ""))
            click.echo(f"  recorded: {one_line(r.answer.recorded, 100)}")
            click.echo(f"  today:    {one_line(r.answer.replayed, 100)}")
    compared = {r.compared for r in results if r.compared is not None}
    click.echo(f"\n{len(results)} calls: {counts['same']} same, {counts['differs']} differ, "
               f"{counts['skipped']} skipped"
               + (" (some compared by their messages only: see docs/replay.md)"
                  if "messages" in compared else ""))
