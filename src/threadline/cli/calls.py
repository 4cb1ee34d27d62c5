"""``threadline calls list|show``: what the model was shown, exactly, on any call."""

from __future__ import annotations

import sys

import click

from threadline.calls import ModelCall
from threadline.cli._common import (
    Context,
    branch_option,
    json_option,
    one_line,
    output,
    pass_context,
    table,
)
from threadline.items import format_time
from threadline.turn.children import descendants


@click.group()
def calls() -> None:
    """Inspect recorded model calls."""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


@calls.command("list")
@click.argument("conversation_id", metavar="CONVERSATION")
@branch_option("Only calls on this branch.", default=None)
@click.option("--children", "with_children", is_flag=True,
              help="Also the calls of the sub-agent conversations it delegated to (and "
                   "theirs), after its own, with a total.")
@json_option()
@pass_context
def list_(ctx: Context, conversation_id: str, branch: str | None, with_children: bool,
          as_json: bool) -> None:
    """A conversation's model calls, in the order they were made."""
    store = ctx.store()
    found = store.calls(conversation_id, branch=branch)
    if with_children:
        for child in descendants(store, conversation_id):
            found += store.calls(child)
    output([c.to_json(with_request=False) for c in found], as_json,
           lambda: _list(found, conversation_id if with_children else None))


def _list(found: list[ModelCall], parent: str | None) -> None:
    rows = [[c.id, c.branch, str(c.turn), str(c.status), str(c.usage.prompt_tokens),
             str(c.usage.cached_tokens), c.reused_from or "-", str(c.usage.completion_tokens),
             _ms(c.timings.ttft_ms), _ms(c.timings.total_ms), c.model] for c in found]
    headers = ["CALL", "BRANCH", "TURN", "STATUS", "PROMPT", "CACHED", "FROM", "OUTPUT",
               "TTFT_MS", "TOTAL_MS", "MODEL"]
    if parent is None:
        table(rows, headers)
        return
    table([[("-" if c.conversation_id == parent else c.conversation_id), *row]
           for c, row in zip(found, rows, strict=True)], ["CHILD", *headers])
    own = [c for c in found if c.conversation_id == parent]
    delegated = [c for c in found if c.conversation_id != parent]
    for label, calls_ in (("own", own), ("delegated", delegated)):
        click.echo(f"{label}: {len(calls_)} calls, "
                   f"{sum(c.usage.prompt_tokens for c in calls_):,} prompt / "
                   f"{sum(c.usage.cached_tokens for c in calls_):,} cached / "
                   f"{sum(c.usage.completion_tokens for c in calls_):,} output tokens")


@calls.command()
@click.argument("call_id", metavar="CALL_ID")
@click.option("--request", "raw_request", is_flag=True,
              help="Print the exact request bytes that were sent, and nothing else.")
@json_option("Print the whole record as JSON.")
@pass_context
def show(ctx: Context, call_id: str, raw_request: bool, as_json: bool) -> None:
    """One model call: its place, usage, timings and response (and the request)."""
    call = ctx.store().call(call_id)
    output(call.to_json(with_request=True), as_json,
           lambda: _raw(call) if raw_request else _describe(call))


def _raw(call: ModelCall) -> None:
    assert call.request is not None
    sys.stdout.buffer.write(call.request.exact_bytes())
    sys.stdout.flush()


def _describe(call: ModelCall) -> None:
    assert call.request is not None
    u, t = call.usage, call.timings
    click.echo(f"call {call.id} · {call.status} · {call.model}")
    click.echo(f"conversation {call.conversation_id} · branch {call.branch} · turn {call.turn}"
               f" · shown items up to #{call.head_seq}"
               + (f" · reply #{call.reply_seq}" if call.reply_seq is not None else ""))
    click.echo(f"started {format_time(call.started_at)} · first token {_ms(t.ttft_ms)} ms · "
               f"total {_ms(t.total_ms)} ms")
    click.echo(f"tokens: prompt {u.prompt_tokens} ({u.cached_tokens} cached) · "
               f"completion {u.completion_tokens}")
    sent = call.request
    click.echo(f"request: {len(sent.messages)} messages, {len(sent.exact_bytes()):,} bytes"
               + ("" if sent.tokens is None else f", {len(sent.tokens)} tokens")
               + " (see it with --request)")
    if call.error:
        click.echo(f"error: {call.error}")
    text = call.response.get("text")
    if isinstance(text, str):
        click.echo(f"response: {one_line(text, 200)}")
