"""``threadline review list|resolve``: the conversations the trajectory monitor flagged for
review, and their resolution (``turn/review.py``; docs/safety.md)."""

from __future__ import annotations

import click

from threadline.cli._common import Context, json_option, one_line, output, pass_context, table
from threadline.items import format_time
from threadline.turn.review import Flag, queue, resolve


@click.group()
def review() -> None:
    """The review queue: conversations the trajectory monitor flagged."""


@review.command("list")
@click.option("--all", "resolved", is_flag=True, help="Include the resolved ones.")
@click.option("--limit", type=click.IntRange(min=1), help="Show at most this many.")
@json_option()
@pass_context
def list_(ctx: Context, resolved: bool, limit: int | None, as_json: bool) -> None:
    """Flagged conversations, newest flag first: the conversation, when it was flagged,
    its risk, the signals that scored, and the message that was judged (a scan of the
    log)."""
    flags = queue(ctx.store(), resolved=resolved, limit=limit)
    output([f.to_json() for f in flags], as_json, lambda: _list(flags, resolved))


def _list(flags: list[Flag], resolved: bool) -> None:
    if not flags:
        click.echo("nothing flagged for review" + ("" if resolved else " is open"), err=True)
        return
    rows = []
    for f in flags:
        signals = ", ".join(f"{s['name']} {float(s['score']):.2f}" for s in f.signals[:3])
        rows.append([f.conversation_id, format_time(f.flagged_at)[:19].replace("T", " "),
                     f"{f.risk:.2f}", str(f.turn), "resolved" if f.resolved else "open",
                     signals or "—", one_line(f.message, 60)])
    table(rows, ["CONVERSATION", "FLAGGED (UTC)", "RISK", "TURN", "STATE", "SIGNALS",
                 "MESSAGE"])


@review.command("resolve")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.option("--note", default="", help="What the review found or did.")
@json_option()
@pass_context
def resolve_(ctx: Context, conversation_id: str, note: str, as_json: bool) -> None:
    """Resolve a conversation's flag: appends a note with the resolution after the flag
    (nothing in the log is changed)."""
    item = resolve(ctx.store(), conversation_id, note)
    output(item.to_json(), as_json, f"resolved: {conversation_id} (note at seq {item.seq})")
