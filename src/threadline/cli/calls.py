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


@click.group()
def calls() -> None:
    """Inspect recorded model calls."""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


@calls.command("list")
@click.argument("conversation_id", metavar="CONVERSATION")
@branch_option("Only calls on this branch.", default=None)
@json_option()
@pass_context
def list_(ctx: Context, conversation_id: str, branch: str | None, as_json: bool) -> None:
    """A conversation's model calls, in the order they were made."""
    found = ctx.store().calls(conversation_id, branch=branch)
    output([c.to_json(with_request=False) for c in found], as_json, lambda: _list(found))


def _list(found: list[ModelCall]) -> None:
    table([[c.id, c.branch, str(c.turn), str(c.status), str(c.usage.prompt_tokens),
            str(c.usage.cached_tokens), c.reused_from or "-", str(c.usage.completion_tokens),
            _ms(c.timings.ttft_ms), _ms(c.timings.total_ms), c.model] for c in found],
          ["CALL", "BRANCH", "TURN", "STATUS", "PROMPT", "CACHED", "FROM", "OUTPUT", "TTFT_MS",
           "TOTAL_MS", "MODEL"])


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
