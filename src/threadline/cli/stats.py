"""``threadline stats``: how turns fare by their index, across conversations."""

from __future__ import annotations

from typing import Any

import click

from threadline.cache.pricing import profile
from threadline.cli._common import (
    Context,
    billing_options,
    json_option,
    output,
    pass_context,
    table,
)
from threadline.items import utc_now
from threadline.stats import (
    GROUPINGS,
    METRICS,
    TurnPoint,
    curves,
    since_of,
    sparkline,
    turn_samples,
)

_TITLES = {"ttft_ms": "ttft ms", "reuse_ratio": "reuse", "prompt_tokens": "prompt tokens",
           "cost_usd": "cost usd"}


@click.command("stats")
@click.option("--conversation", "conversations", multiple=True, metavar="ID",
              help="Only this conversation (repeatable). Default: every one.")
@click.option("--since", metavar="WHEN",
              help="Only calls made since: an ISO date or time (UTC unless it says), or a "
                   "span back from now: 90m, 36h, 7d.")
@click.option("--group", "grouping", type=click.Choice(GROUPINGS), default="auto",
              show_default=True, help="One row per turn index, per bucket of indexes (1, "
                                      "2-5, 6-10, …), or auto: buckets past 20 indexes.")
@billing_options()
@json_option()
@pass_context
def stats(ctx: Context, conversations: tuple[str, ...], since: str | None, grouping: str,
          profile_name: str, input_price: float, as_json: bool) -> None:
    """Per-turn-index curves across conversations.

    For each turn index: time to first token, reuse (cached ÷ prompt tokens), prompt tokens
    and cost, each as median, 90th percentile and count; then a terminal chart of the medians
    (docs/observability.md)."""
    pricing = profile(profile_name)
    start = None if since is None else since_of(since, utc_now())
    samples = turn_samples(ctx.store(), profile=pricing, input_price=input_price,
                           conversations=conversations, since=start)
    points = curves(samples, grouping)
    shown = {"profile": pricing.name, "input_price": input_price,
             "since": None if start is None else start.isoformat(),
             "conversations": len({s.conversation_id for s in samples}),
             "turns": len(samples), "points": [p.to_json() for p in points]}
    output(shown, as_json, lambda: _print(points, shown))


def _cell(value: float | None, metric: str) -> str:
    if value is None:
        return "-"
    if metric == "reuse_ratio":
        return f"{value:.0%}"
    if metric == "cost_usd":
        return f"{value:.4f}"
    if metric == "ttft_ms":
        return f"{value:,.1f}"
    return f"{value:,.0f}"


def _print(points: list[TurnPoint], shown: dict[str, Any]) -> None:
    if not points:
        click.echo("no turns recorded" + ("" if shown["since"] is None else
                                          f" since {shown['since']}")
                   + ": nothing to chart yet (each turn's model calls make the curves)")
        return
    table([[p.label, str(p.turns),
            *(f"{_cell(p.metrics[m].median, m)} / {_cell(p.metrics[m].p90, m)}"
              for m in METRICS)] for p in points],
          ["TURN", "N", "TTFT_MS p50/p90", "REUSE p50/p90", "PROMPT p50/p90", "USD p50/p90"])
    click.echo(f"\nmedian by turn index ({points[0].label} … {points[-1].label}):")
    for metric in METRICS:
        medians = [p.metrics[metric].median for p in points]
        known = [v for v in medians if v is not None]
        ends = "" if not known else \
            f"  {_cell(known[0], metric)} → {_cell(known[-1], metric)}"
        click.echo(f"  {_TITLES[metric]:<14}{sparkline(medians)}{ends}")
    conversations = shown["conversations"]
    click.echo(f"\n{shown['turns']} turns in {conversations} "
               f"conversation{'' if conversations == 1 else 's'} · "
               f"{shown['profile']} at ${shown['input_price']}/M")
