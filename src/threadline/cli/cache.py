"""``threadline cache report|diagnose``: how much each call reused, why it missed, what it
cost; and the same diagnosis for other systems' request logs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from threadline.cache.diagnose import Finding, TurnReuse, diagnose, parse_log
from threadline.cache.pricing import profile
from threadline.cache.report import CallReuse, chart, reuse_of
from threadline.cli._common import (
    Context,
    billing_options,
    branch_option,
    confirm,
    json_option,
    output,
    pass_context,
    table,
    yes_option,
)
from threadline.models.kv import tiers as kv_tiers
from threadline.turn.children import descendants


@click.group()
def cache() -> None:
    """Prefix-cache reuse: reports and diagnosis; the local model's KV snapshots."""


@cache.command("stats")
@json_option()
@pass_context
def stats(ctx: Context, as_json: bool) -> None:
    """The local model's KV snapshots on disk: per model, how many and how many bytes,
    against the budget (THREADLINE_KV_DISK_MB; memory: THREADLINE_KV_MEMORY_MB per process)."""
    settings = ctx.settings
    found = kv_tiers.usage(settings.kv_dir)
    shown = {"folder": str(settings.kv_dir), "disk_budget_bytes": settings.kv_disk_bytes,
             "memory_budget_bytes": settings.kv_memory_bytes,
             "models": [f.to_json() for f in found],
             "bytes": sum(f.bytes for f in found)}

    def human() -> None:
        click.echo(f"{shown['folder']}: {shown['bytes']:,} of {settings.kv_disk_bytes:,} bytes "
                   f"on disk; up to {settings.kv_memory_bytes:,} in each process's memory")
        if found:
            table([[f.identity, str(f.snapshots), f"{f.bytes:,}", f.model or "-"]
                   for f in found], ["IDENTITY", "SNAPSHOTS", "BYTES", "MODEL"])

    output(shown, as_json, human)


@cache.command("clear")
@yes_option()
@json_option()
@pass_context
def clear(ctx: Context, yes: bool, as_json: bool) -> None:
    """Delete the local model's KV snapshots on disk (every model's). The next turn of each
    conversation prefills its history again, once."""
    folder = ctx.settings.kv_dir
    confirm(f"delete every KV snapshot under {folder}", yes)
    deleted = kv_tiers.clear(folder)
    output({"folder": str(folder), "deleted": deleted}, as_json,
           f"deleted {deleted} KV snapshots under {folder}")


@cache.command("report")
@click.argument("conversation_id", metavar="CONVERSATION")
@branch_option("Only calls on this branch.", default=None)
@click.option("--children", "with_children", is_flag=True,
              help="Also bill the sub-agent conversations it delegated to (and theirs), "
                   "each against its own previous call, in a total with its own.")
@billing_options()
@json_option()
@pass_context
def report(ctx: Context, conversation_id: str, branch: str | None, with_children: bool,
           profile_name: str, input_price: float, as_json: bool) -> None:
    """Per call: prompt tokens, reused tokens, ratio, the cause of any miss, billed cost."""
    pricing = profile(profile_name)
    store = ctx.store()
    rows = reuse_of(store.calls(conversation_id, branch=branch), pricing, input_price)
    total = sum(r.cost_usd for r in rows)
    uncached = sum(r.uncached_cost_usd for r in rows)
    misses = [r for r in rows if r.prefix is not None and not r.prefix.expected]
    shown = {"conversation_id": conversation_id, "profile": pricing.name,
             "input_price": input_price, "calls": [r.to_json() for r in rows],
             "cost_usd": round(total, 6), "uncached_cost_usd": round(uncached, 6),
             "unexpected_misses": len(misses)}
    if with_children:
        children = [(child, reuse_of(store.calls(child), pricing, input_price))
                    for child in descendants(store, conversation_id)]
        costs = [sum(r.cost_usd for r in found) for _, found in children]
        shown["children"] = [{"conversation_id": child, "calls": len(found),
                              "prompt_tokens": sum(r.call.usage.prompt_tokens for r in found),
                              "cached_tokens": sum(r.call.usage.cached_tokens for r in found),
                              "cost_usd": round(cost, 6)}
                             for (child, found), cost in zip(children, costs, strict=True)]
        shown["total_cost_usd"] = round(total + sum(costs), 6)
    output(shown, as_json, lambda: _print_report(shown, rows, misses))


def _print_report(shown: dict[str, Any], rows: list[CallReuse], misses: list[CallReuse]) -> None:
    if not rows:
        click.echo(f"{shown['conversation_id']} has no model calls yet", err=True)
        return
    table([[str(r.call.turn), r.call.branch, str(r.call.usage.prompt_tokens),
            f"{'~' if r.estimated else ''}{r.reusable_tokens}", str(r.call.usage.cached_tokens),
            r.call.reused_from or "-",
            "-" if r.prefix is None else f"{r.prefix.ratio:.0%}",
            "-" if r.prefix is None else f"{r.prefix.best_ratio:.0%}",
            f"{r.cost_usd:.4f}", "-" if r.prefix is None else str(r.prefix.cause)]
           for r in rows],
          ["TURN", "BRANCH", "PROMPT", "REUSABLE", "CACHED", "FROM", "RATIO", "BEST", "USD",
           "CAUSE"])
    click.echo()
    for line in chart(rows):
        click.echo(line)
    for r in misses:
        assert r.prefix is not None
        click.echo(f"turn {r.call.turn}: {r.prefix.detail}")
    click.echo(f"\n{len(rows)} calls · {shown['profile']} at ${shown['input_price']}/M: "
               f"${shown['cost_usd']:.4f} (without a cache: ${shown['uncached_cost_usd']:.4f}) "
               f"· {len(misses)} unexpected misses")
    if "children" in shown:
        for child in shown["children"]:
            click.echo(f"  child {child['conversation_id']}: {child['calls']} calls, "
                       f"{child['prompt_tokens']:,} prompt / {child['cached_tokens']:,} "
                       f"cached tokens, ${child['cost_usd']:.4f}")
        click.echo(f"with its sub-agents: ${shown['total_cost_usd']:.4f}")


@cache.command("diagnose")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@json_option("Print JSON findings.")
def diagnose_(file: str, as_json: bool) -> None:
    """Name the prefix-reuse pattern in a request log from another system.

    FILE has one request per line (OpenAI chat-completions or Anthropic Messages JSON), in the
    order they were sent for one conversation; - reads standard input.
    """
    data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    turns, findings = diagnose(parse_log(data))
    output({"turns": [t.to_json() for t in turns], "findings": [f.to_json() for f in findings]},
           as_json, lambda: _print_diagnosis(turns, findings))


def _print_diagnosis(turns: list[TurnReuse], findings: list[Finding]) -> None:
    table([[str(t.turn), f"{t.chars:,}", f"{t.reused:,}",
            f"{t.reused / t.chars:.0%}" if t.chars else "-",
            f"{t.best / t.chars:.0%}" if t.chars else "-"] for t in turns],
          ["TURN", "CHARS", "REUSED", "RATIO", "BEST"])
    click.echo()
    for finding in findings:
        click.echo(f"{finding.kind} (from turn {finding.turn}): {finding.detail}")
