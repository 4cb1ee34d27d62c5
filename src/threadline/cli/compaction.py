"""``threadline conversations context|compact`` (registered in ``cli/conversations.py``),
``threadline constraints list|add|delete`` and ``threadline state show|update``."""

from __future__ import annotations

import json
from typing import Any

import click

from threadline.cli._common import (
    Context,
    branch_option,
    confirm,
    json_option,
    model_option,
    one_line,
    output,
    pass_context,
    table,
    yes_option,
)
from threadline.compaction.auto import Compaction
from threadline.compaction.compact import Compacted
from threadline.compaction.constraints import (
    active,
    add_constraint,
    remove_constraint,
    undetected,
)
from threadline.compaction.plan import policy_for, request_tokens
from threadline.compaction.view import STRATEGIES, context_view
from threadline.compaction.working_state import state_of, update_state
from threadline.engine import Engine
from threadline.errors import InputError
from threadline.stores import Store

_TOKENIZER = model_option("Whose tokenizer counts tokens.")


def _checked(ctx: Context, conversation_id: str, branch: str) -> Store:
    store = ctx.store()
    store.conversation(conversation_id)
    store.head(conversation_id, branch)  # an unknown branch fails here
    return store


def _engine(ctx: Context, conversation_id: str, branch: str, model_name: str | None) -> Engine:
    _checked(ctx, conversation_id, branch)  # unknown ids fail before a model loads
    return ctx.engine(ctx.model(model_name))


@click.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@branch_option()
@_TOKENIZER
@json_option()
@pass_context
def context(ctx: Context, conversation_id: str, branch: str, model_name: str | None,
            as_json: bool) -> None:
    """The request the next turn would send, segment by segment."""
    engine = _engine(ctx, conversation_id, branch, model_name)
    request = engine.request_for(conversation_id, branch)
    counted = dict((id(m), n) for m, n in request_tokens(request, engine.count))
    segments: list[dict[str, Any]] = []
    for segment in request.segments:
        messages = [{"role": m.role, "seq": m.seq, "kind": m.item_kind,
                     "tokens": counted[id(m)], "content": m.content} for m in segment.messages]
        segments.append({"segment": str(segment.kind), "stability": str(segment.stability),
                         "cache_point": segment.cache_point, "messages": messages,
                         "tokens": sum(m["tokens"] for m in messages)})
    shown = {"conversation_id": conversation_id, "branch": branch,
             "tokens": sum(n for _, n in request_tokens(request, engine.count)),
             "compaction_seq": request.compaction_seq,
             "tools": [t.to_openai() for t in request.tools], "segments": segments}
    output(shown, as_json, lambda: _print_context(shown))


def _print_context(shown: dict[str, Any]) -> None:
    click.echo(f"{shown['conversation_id']} · branch {shown['branch']} · {shown['tokens']} "
               "tokens" + (f" · after compaction #{shown['compaction_seq']}"
                           if shown["compaction_seq"] is not None else ""))
    for segment in shown["segments"]:
        if not segment["messages"] and not segment["cache_point"]:
            continue
        mark = "  ▌ cache breakpoint" if segment["cache_point"] else ""
        click.echo(f"\n{segment['segment']} ({segment['stability']}, {segment['tokens']} "
                   f"tokens){mark}")
        for m in segment["messages"]:
            seq = "" if m["seq"] is None else f"#{m['seq']} "
            click.echo(f"  {seq}{m['role']:<9} {m['tokens']:>6}  {one_line(m['content'], 70)}")


@click.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@branch_option()
@click.option("--budget", type=click.IntRange(min=1), metavar="TOKENS",
              help="Tokens the next request should fit in. Default: the low-water mark.")
@click.option("--strategy", type=click.Choice(STRATEGIES),
              help="Use this strategy only. Default: the lightest that reaches the budget.")
@click.option("--boundary", is_flag=True,
              help="A task just ended: summarise everything up to the last completed turn.")
@click.option("--dry-run", is_flag=True, help="Say what would happen and what it costs; "
              "change nothing.")
@_TOKENIZER
@json_option()
@pass_context
def compact(ctx: Context, conversation_id: str, branch: str, budget: int | None,
            strategy: str | None, boundary: bool, dry_run: bool, model_name: str | None,
            as_json: bool) -> None:
    """Compact a branch: one recorded event; the log keeps every original item."""
    if boundary and strategy not in (None, "summary"):
        raise click.UsageError("--boundary summarises; it does not combine with --strategy "
                               f"{strategy}")
    engine = _engine(ctx, conversation_id, branch, model_name)
    done = Compaction(policy_for(engine.model), detector=ctx.constraint_detector()).compact(
        engine, conversation_id, branch, budget=budget, strategy=strategy, dry_run=dry_run,
        boundary=boundary)
    output(done.to_json(), as_json, lambda: _print_compaction(done))


def _print_compaction(done: Compacted) -> None:
    for item in done.constraints:
        click.echo(f"recorded constraint #{item.seq}: {item.content['text']}")
    plan = done.plan
    if plan is None:
        click.echo(done.detail)
        return
    price = plan.price
    verb = "would compact" if done.applied is None else f"compacted (event #{done.applied.seq})"
    click.echo(f"{verb}: {plan.strategy}, {plan.tokens_before} → {plan.tokens_after} tokens "
               f"({plan.saved} saved; {plan.kept_prefix} stay cached)")
    click.echo(f"price over {price.horizon_turns} turns ({price.profile}): carry on "
               f"${price.append_usd:.4f} · compact now ${price.compact_usd:.4f}")
    if plan.cleared:
        click.echo(f"cleared tool results: {', '.join(f'#{s}' for s in plan.cleared)}")
    if plan.through_seq is not None:
        click.echo(f"items up to #{plan.through_seq} leave the context (recall keeps them)")
    if plan.pinned:
        click.echo(f"pinned constraints: {', '.join(f'#{s}' for s in plan.pinned)}")
    if done.applied is None:
        click.echo(done.detail)


@click.group()
def constraints() -> None:
    """Standing instructions: listed, added, edited and deleted by the user."""


@constraints.command("list")
@click.argument("conversation_id", metavar="CONVERSATION")
@branch_option()
@json_option()
@pass_context
def list_(ctx: Context, conversation_id: str, branch: str, as_json: bool) -> None:
    """Constraints in force, and which are pinned in the context."""
    history = ctx.store().history(conversation_id, branch)
    view = context_view(history)
    pinned = {c.seq for c in view.pinned}
    found = [{"seq": c.seq, "text": c.text, "source": c.source, "from_seq": c.from_seq,
              "pinned": c.seq in pinned} for c in view.constraints]
    pending = [{"text": n.content["text"], "from_seq": n.content["from_seq"]}
               for n in undetected(history)]

    def human() -> None:
        if not found and not pending:
            click.echo("no standing constraints", err=True)
        if found:
            table([[f"#{c['seq']}", str(c["source"]), "yes" if c["pinned"] else "no",
                    one_line(str(c["text"]), 70)] for c in found],
                  ["SEQ", "SOURCE", "PINNED", "TEXT"])
        for p in pending:
            click.echo(f"detected in message #{p['from_seq']}, recorded at the next "
                       f"compaction: {p['text']}")

    output({"conversation_id": conversation_id, "branch": branch, "constraints": found,
            "detected_not_recorded": pending}, as_json, human)


@constraints.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@click.argument("text")
@branch_option()
@click.option("--replaces", type=int, metavar="SEQ", help="Edit: replace this constraint.")
@json_option()
@pass_context
def add(ctx: Context, conversation_id: str, text: str, branch: str, replaces: int | None,
        as_json: bool) -> None:
    """Add a standing instruction (applies from the next turn)."""
    item = add_constraint(_checked(ctx, conversation_id, branch), conversation_id, text, branch,
                          replaces=replaces, max_bytes=ctx.settings.max_message_bytes)
    output(item.to_json(), as_json, f"constraint #{item.seq} added"
           + (f", replacing #{replaces}" if replaces is not None else ""))


@constraints.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@click.argument("seq", type=int)
@branch_option()
@yes_option()
@json_option()
@pass_context
def delete(ctx: Context, conversation_id: str, seq: int, branch: str, yes: bool,
           as_json: bool) -> None:
    """Withdraw a constraint: it stops applying from the next turn; the log keeps it."""
    store = _checked(ctx, conversation_id, branch)
    found = [c for c in active(store.history(conversation_id, branch)) if c.seq == seq]
    if found:  # a seq that is not an active constraint is refused below, before any write
        confirm(f"delete constraint #{seq} ({one_line(found[0].text, 50)})", yes)
    item = remove_constraint(store, conversation_id, seq, branch)
    output(item.to_json(), as_json, f"constraint #{seq} deleted; the log keeps it")


@click.group()
def state() -> None:
    """The task's working state: goal, plan, decisions, facts, open questions."""


@state.command("show")
@click.argument("conversation_id", metavar="CONVERSATION")
@branch_option()
@json_option()
@pass_context
def state_show(ctx: Context, conversation_id: str, branch: str, as_json: bool) -> None:
    """The newest working state (what the tail of the next turn shows)."""
    current = state_of(_checked(ctx, conversation_id, branch).history(conversation_id, branch))

    def human() -> None:
        if current.empty:
            click.echo("no working state yet; set one with: threadline state update", err=True)
        else:
            click.echo(current.render())

    output(current.to_json(), as_json, human)


@state.command("update")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.argument("changes", metavar="JSON")
@branch_option()
@json_option()
@pass_context
def state_update(ctx: Context, conversation_id: str, changes: str, branch: str,
                 as_json: bool) -> None:
    """Apply JSON changes, e.g. '{"goal": "…", "add_steps": ["…"]}' (fields: goal, steps,
    add_steps, step_status, decisions, add_decisions, facts, add_facts, questions,
    add_questions, resolve)."""
    try:
        parsed = json.loads(changes)
    except json.JSONDecodeError as err:
        raise InputError(f"the changes are not valid JSON ({err.msg} at character "
                         f"{err.pos})", hint='e.g. \'{"goal": "Ship v2"}\'') from err
    if not isinstance(parsed, dict):
        raise InputError("the changes must be a JSON object", hint='e.g. \'{"goal": "Ship v2"}\'')
    store = _checked(ctx, conversation_id, branch)
    new = update_state(store, conversation_id, parsed, branch)
    output(new.to_json(), as_json, new.render())
