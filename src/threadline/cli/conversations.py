"""``threadline conversations list|show|fork|delete|verify|context|compact`` (the last two
live in ``cli/compaction.py``)."""

from __future__ import annotations

from collections.abc import Sequence

import click

from threadline.cli._common import (
    Context,
    branch_option,
    confirm,
    json_option,
    one_line,
    output,
    pass_context,
    table,
    yes_option,
)
from threadline.cli.compaction import compact, context
from threadline.items import Branch, Conversation, Item, ItemKind, format_time
from threadline.stores import ConversationSummary
from threadline.stores.verify import verify_conversation
from threadline.turn import monitoring
from threadline.turn.children import Child, delegations, delete_with_children, descendants
from threadline.turn.delegate import ParentLink, parent_of
from threadline.turn.fork import fork as fork_branch

_LABEL = {ItemKind.USER: "user", ItemKind.ASSISTANT: "assistant", ItemKind.TOOL_CALL: "tool call",
          ItemKind.TOOL_RESULT: "tool result", ItemKind.NOTE: "note",
          ItemKind.COMPACTION: "compaction"}


@click.group()
def conversations() -> None:
    """List, inspect, fork, compact and delete conversations."""


conversations.add_command(context)
conversations.add_command(compact)


@conversations.command("list")
@click.option("--limit", type=click.IntRange(min=1), help="Show at most this many.")
@json_option()
@pass_context
def list_(ctx: Context, limit: int | None, as_json: bool) -> None:
    """Conversations, most recently active first."""
    summaries = ctx.store().conversations(limit=limit)
    output([s.to_json() for s in summaries], as_json, lambda: _list(summaries))


def _list(summaries: list[ConversationSummary]) -> None:
    if not summaries:
        click.echo("no conversations yet; start one with: threadline chat", err=True)
        return
    table([[s.conversation.id, format_time(s.updated_at)[:19].replace("T", " "), str(s.turns),
            str(s.branches), one_line(s.title, 60)] for s in summaries],
          ["ID", "UPDATED (UTC)", "TURNS", "BRANCHES", "TITLE"])


@conversations.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@branch_option()
@json_option()
@pass_context
def show(ctx: Context, conversation_id: str, branch: str, as_json: bool) -> None:
    """The items of one branch of a conversation, oldest first, with the conversation that
    delegated it (if it is a sub-agent's) and the sub-agent conversations it started."""
    store = ctx.store()
    conversation = store.conversation(conversation_id)
    branches = store.branches(conversation_id)
    items = store.history(conversation_id, branch)
    parent, children = parent_of(conversation), delegations(store, conversation_id)
    output({"conversation": conversation.to_json(), "branch": branch,
            "branches": [b.to_json() for b in branches], "items": [i.to_json() for i in items],
            "parent": None if parent is None else parent.to_json(),
            "children": [c.to_json() for c in children]},
           as_json, lambda: _show(conversation, branch, branches, items, parent, children))


def _show(conversation: Conversation, branch: str, branches: list[Branch],
          items: Sequence[Item], parent: ParentLink | None, children: list[Child]) -> None:
    click.echo(f"conversation {conversation.id} · created {format_time(conversation.created_at)}")
    if conversation.system:
        click.echo(f"system: {one_line(conversation.system)}")
    if parent is not None:
        asked = "from code" if parent.call_id is None else f"tool call {parent.call_id}"
        click.echo(f"sub-agent {parent.agent} of {parent.conversation_id} (turn {parent.turn}, "
                   f"{asked}; generation {parent.depth})")
    for child in children:
        spent = "" if child.details is None else (
            f" · {child.details['calls']} calls, {child.details['prompt_tokens']:,} prompt / "
            f"{child.details['cached_tokens']:,} cached / {child.details['output_tokens']:,} "
            "output tokens")
        click.echo(f"   child {child.child_id} ({child.agent}, turn {child.turn}): "
                   f"{child.status}{spent}")
    for b in branches:
        origin = "" if b.parent is None else f" (forked from item {b.fork_seq} on {b.parent})"
        marker = "*" if b.name == branch else " "
        click.echo(f" {marker} branch {b.name}{origin}")
    click.echo()
    for item in items:
        head = f"#{item.seq:<4} turn {item.turn:<3} {_LABEL.get(item.kind, str(item.kind))}"
        decided = monitoring.decision(item)  # a monitor's decision: one line, not its JSON
        text = (item.text if decided is None else
                f"{item.content['provider']}: {monitoring.describe(decided)}").replace(
                    "\n", "\n" + " " * 8)
        click.echo(f"{head}\n        {text}")


@conversations.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@click.option("--from", "from_seq", type=int, required=True, metavar="SEQ",
              help="The item the new branch grows from.")
@click.option("--name", help="Branch name. Default: b2, b3, …")
@json_option()
@pass_context
def fork(ctx: Context, conversation_id: str, from_seq: int, name: str | None,
         as_json: bool) -> None:
    """Start a new branch from an earlier item; the original branch stays intact."""
    branch = fork_branch(ctx.store(), conversation_id, from_seq, name)
    output({"conversation_id": conversation_id, **branch.to_json()}, as_json,
           f"created branch {branch.name} from item {from_seq}; continue it with:\n"
           f"  threadline chat --conversation {conversation_id} --branch {branch.name}")


@conversations.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@yes_option()
@json_option()
@pass_context
def delete(ctx: Context, conversation_id: str, yes: bool, as_json: bool) -> None:
    """Delete a conversation with all its branches, items and model calls, and the
    conversations of the sub-agents it delegated to."""
    store = ctx.store()
    summary = store.summary(conversation_id)
    below = descendants(store, conversation_id)
    what = f"{conversation_id} ({summary.items} items, {summary.calls} model calls)" + (
        f" and its {len(below)} sub-agent conversation(s)" if below else "")
    confirm(f"delete conversation {what}", yes)
    delete_with_children(store, conversation_id)
    output({"deleted": conversation_id, "items": summary.items, "calls": summary.calls,
            **({"children": below} if below else {})}, as_json, f"deleted {what}")


@conversations.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@json_option()
@pass_context
def verify(ctx: Context, conversation_id: str, as_json: bool) -> None:
    """Recompute every hash chain and parent link; exit 1 if anything is damaged."""
    problems = verify_conversation(ctx.store(), conversation_id)

    def report() -> None:
        for p in problems:
            click.echo(f"item {p.seq} (branch {p.branch}): {p.detail}")
        if not problems:
            click.echo(f"{conversation_id}: every branch verifies")

    output({"conversation_id": conversation_id, "ok": not problems,
            "problems": [p.to_json() for p in problems]}, as_json, report)
    click.get_current_context().exit(1 if problems else 0)
