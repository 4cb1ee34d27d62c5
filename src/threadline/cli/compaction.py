"""``threadline context``, ``compact``, ``constraints`` and ``state``."""

from __future__ import annotations

import json
from typing import Any

import click

from threadline.cli._common import Context, emit_json, one_line, pass_context, table
from threadline.compaction.auto import Compaction
from threadline.compaction.constraints import add_constraint, remove_constraint, undetected
from threadline.compaction.plan import policy_for, request_tokens
from threadline.compaction.view import STRATEGIES, context_view
from threadline.compaction.working_state import state_of, update_state
from threadline.engine import Engine
from threadline.errors import InputError
from threadline.models import MODELS
from threadline.stores import MAIN, Store

_MODEL = click.option("--model", "model_name", type=click.Choice(sorted(MODELS)),
                      help="Whose tokenizer counts tokens. Default: $THREADLINE_MODEL, else "
                           "local.")
_BRANCH = click.option("--branch", default=MAIN, show_default=True)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _engine(ctx: Context, conversation_id: str, branch: str, model_name: str | None) -> Engine:
    _checked(ctx, conversation_id, branch)  # unknown ids fail before a model loads
    return ctx.engine(ctx.model(model_name))


@click.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@_BRANCH
@_MODEL
@_JSON
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
    total = sum(n for _, n in request_tokens(request, engine.count))
    if as_json:
        emit_json({"conversation_id": conversation_id, "branch": branch, "tokens": total,
                   "compaction_seq": request.compaction_seq,
                   "tools": [t.to_openai() for t in request.tools], "segments": segments})
        return
    click.echo(f"{conversation_id} · branch {branch} · {total} tokens"
               + (f" · after compaction #{request.compaction_seq}"
                  if request.compaction_seq is not None else ""))
    for shown in segments:
        if not shown["messages"] and not shown["cache_point"]:
            continue
        mark = "  ▌ cache breakpoint" if shown["cache_point"] else ""
        click.echo(f"\n{shown['segment']} ({shown['stability']}, {shown['tokens']} "
                   f"tokens){mark}")
        for m in shown["messages"]:
            seq = "" if m["seq"] is None else f"#{m['seq']} "
            click.echo(f"  {seq}{m['role']:<9} {m['tokens']:>6}  {one_line(m['content'], 70)}")


@click.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@_BRANCH
@click.option("--budget", type=click.IntRange(min=1), metavar="TOKENS",
              help="Tokens the next request should fit in. Default: the low-water mark.")
@click.option("--strategy", type=click.Choice(STRATEGIES),
              help="Use this strategy only. Default: the lightest that reaches the budget.")
@click.option("--boundary", is_flag=True,
              help="A task just ended: summarise everything up to the last completed turn.")
@click.option("--dry-run", is_flag=True, help="Say what would happen and what it costs; "
              "change nothing.")
@_MODEL
@_JSON
@pass_context
def compact(ctx: Context, conversation_id: str, branch: str, budget: int | None,
            strategy: str | None, boundary: bool, dry_run: bool, model_name: str | None,
            as_json: bool) -> None:
    """Compact a branch: one recorded event; the log keeps every original item."""
    if boundary and strategy not in (None, "summary"):
        raise click.UsageError("--boundary summarises; it does not combine with --strategy "
                               f"{strategy}")
    engine = _engine(ctx, conversation_id, branch, model_name)
    done = Compaction(policy_for(engine.model)).compact(
        engine, conversation_id, branch, budget=budget, strategy=strategy, dry_run=dry_run,
        boundary=boundary)
    if as_json:
        emit_json(done.to_json())
        return
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
    """Standing instructions: listed, added, edited and removed by the user."""


@constraints.command("list")
@click.argument("conversation_id", metavar="CONVERSATION")
@_BRANCH
@_JSON
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
    if as_json:
        emit_json({"conversation_id": conversation_id, "branch": branch, "constraints": found,
                   "detected_not_recorded": pending})
        return
    if not found and not pending:
        click.echo("no standing constraints", err=True)
        return
    if found:
        table([[f"#{c['seq']}", str(c["source"]), "yes" if c["pinned"] else "no",
                one_line(str(c["text"]), 70)] for c in found],
              ["SEQ", "SOURCE", "PINNED", "TEXT"])
    for p in pending:
        click.echo(f"detected in message #{p['from_seq']}, recorded at the next compaction: "
                   f"{p['text']}")


@constraints.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@click.argument("text")
@_BRANCH
@click.option("--replaces", type=int, metavar="SEQ", help="Edit: replace this constraint.")
@_JSON
@pass_context
def add(ctx: Context, conversation_id: str, text: str, branch: str, replaces: int | None,
        as_json: bool) -> None:
    """Add a standing instruction (applies from the next turn)."""
    item = add_constraint(_checked(ctx, conversation_id, branch), conversation_id, text, branch,
                          replaces=replaces, max_bytes=ctx.settings.max_message_bytes)
    if as_json:
        emit_json(item.to_json())
    else:
        click.echo(f"constraint #{item.seq} added" + (f", replacing #{replaces}"
                                                       if replaces is not None else ""))


@constraints.command()
@click.argument("conversation_id", metavar="CONVERSATION")
@click.argument("seq", type=int)
@_BRANCH
@_JSON
@pass_context
def remove(ctx: Context, conversation_id: str, seq: int, branch: str, as_json: bool) -> None:
    """Withdraw a constraint (the log keeps it; it stops applying from the next turn)."""
    item = remove_constraint(_checked(ctx, conversation_id, branch), conversation_id, seq, branch)
    if as_json:
        emit_json(item.to_json())
    else:
        click.echo(f"constraint #{seq} removed")


def _checked(ctx: Context, conversation_id: str, branch: str) -> Store:
    store = ctx.store()
    store.conversation(conversation_id)
    store.head(conversation_id, branch)  # an unknown branch fails here
    return store


@click.group()
def state() -> None:
    """The task's working state: goal, plan, decisions, facts, open questions."""


@state.command("show")
@click.argument("conversation_id", metavar="CONVERSATION")
@_BRANCH
@_JSON
@pass_context
def state_show(ctx: Context, conversation_id: str, branch: str, as_json: bool) -> None:
    """The newest working state (what the tail of the next turn shows)."""
    current = state_of(_checked(ctx, conversation_id, branch).history(conversation_id, branch))
    if as_json:
        emit_json(current.to_json())
    elif current.empty:
        click.echo("no working state yet; set one with: threadline state update", err=True)
    else:
        click.echo(current.render())


@state.command("update")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.argument("changes", metavar="JSON")
@_BRANCH
@_JSON
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
    if as_json:
        emit_json(new.to_json())
    else:
        click.echo(new.render())
