"""``threadline rewrite``: a follow-up as a standalone query (the evaluations of the rewriters
are in ``cli/rewrite_eval.py``)."""

from __future__ import annotations

import click

from threadline.cli._common import (
    Context,
    branch_option,
    json_option,
    model_option,
    output,
    pass_context,
)
from threadline.providers.query import rewrite as standalone_rewrite
from threadline.rewrite import DEFAULT_DEADLINE_S

_REWRITER = model_option("The model rewriter's backend.")
_DEADLINE = click.option("--deadline", type=click.FloatRange(0.001, 60), default=DEFAULT_DEADLINE_S,
                         show_default=True, help="Seconds before the raw message is used.")


@click.command()
@click.argument("text")
@click.option("--conversation", "conversation_id", required=True, metavar="ID")
@branch_option()
@_REWRITER
@click.option("--no-model", is_flag=True, help="Only the deterministic rewriter.")
@_DEADLINE
@json_option()
@pass_context
def rewrite(ctx: Context, text: str, conversation_id: str, branch: str,
            model_name: str | None, no_model: bool, deadline: float, as_json: bool) -> None:
    """Rewrite a follow-up into a standalone query, given a conversation.

    The query is what corpus search and memory recall use; nothing is saved."""
    store = ctx.store()
    store.conversation(conversation_id)
    store.head(conversation_id, branch)  # unknown ids fail before a model loads
    engine = ctx.engine(ctx.model("scripted" if no_model else model_name))
    result = standalone_rewrite(engine, conversation_id, text, branch, deadline_s=deadline,
                                use_model=not no_model)

    def human() -> None:
        click.echo(result.rewritten)
        why = f", raw because: {result.fallback}" if result.fallback else ""
        click.echo(f"[{result.winner}, {result.latency_ms:.1f} ms{why}; preserved: "
                   f"{', '.join(result.preserved) or 'nothing'}]", err=True)

    output(result.to_json(), as_json, human)
