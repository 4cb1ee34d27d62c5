"""``threadline cost simulate|replay|profiles``: price conversations before they happen, and
real ones replayed through assembly policies."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from threadline.cache.pricing import profile, profiles
from threadline.cache.simulate import Scenario, Simulation, simulate
from threadline.cache.tokens import default_tokenizer
from threadline.cli._common import (
    Context,
    billing_options,
    json_option,
    output,
    pass_context,
    table,
)
from threadline.eval.replay import POLICIES, ReplayResult, replay
from threadline.interop.importers import ImportRecord, read_records


@click.group()
def cost() -> None:
    """Price conversations under providers' prompt-cache rules."""


@cost.command("simulate")
@click.option("--turns", type=click.IntRange(min=1), required=True, help="Turns to simulate.")
@click.option("--tokens-per-turn", type=click.IntRange(min=1), required=True,
              help="Tokens each turn adds (user message plus reply).")
@click.option("--preamble-tokens", type=click.IntRange(min=0), default=0, show_default=True,
              help="Tools, system prompt and static context sent before the turns.")
@click.option("--warm-tokens", type=click.IntRange(min=0), default=0, show_default=True,
              help="Context already sent and cached before the first simulated turn.")
@click.option("--input-price", type=click.FloatRange(min=0), required=True,
              metavar="USD_PER_MTOK", help="List price of input tokens, USD per million.")
@click.option("--output-price", type=click.FloatRange(min=0), default=0.0,
              metavar="USD_PER_MTOK", help="Output price, for a compaction's summary.")
@click.option("--profile", "profile_name", default="anthropic-5m", show_default=True,
              help="Cache profile (see: threadline cost profiles).")
# not the shared --model: a provider's model name (e.g. claude-sonnet-4), not a backend
@click.option("--model", help="Model name, for per-model minimum cacheable prefixes.")
@click.option("--compact-at", type=click.IntRange(min=1), metavar="TURN",
              help="Compact before this turn.")
@click.option("--compact-to", type=click.IntRange(min=1), metavar="TOKENS",
              help="Context size right after compacting (summary plus kept turns).")
@click.option("--summary-tokens", type=click.IntRange(min=0), default=0, show_default=True,
              help="Tokens the compaction call generates.")
@json_option("Print JSON, with every turn's bill.")
def simulate_(turns: int, tokens_per_turn: int, preamble_tokens: int, warm_tokens: int,
              input_price: float, output_price: float, profile_name: str, model: str | None,
              compact_at: int | None, compact_to: int | None, summary_tokens: int,
              as_json: bool) -> None:
    """Total input tokens and cost of an N-turn conversation, turn by turn."""
    scenario = Scenario(turns=turns, tokens_per_turn=tokens_per_turn,
                        preamble_tokens=preamble_tokens, warm_tokens=warm_tokens,
                        input_price=input_price, output_price=output_price,
                        compact_at=compact_at, compact_to=compact_to,
                        summary_tokens=summary_tokens, model=model)
    result = simulate(scenario, profile(profile_name))
    output(result.to_json(), as_json, lambda: _print_simulation(result, compact_at))


def _print_simulation(result: Simulation, compact_at: int | None) -> None:
    table([[str(n), f"{b.prompt_tokens:,}", f"{b.read_tokens:,}",
            f"{b.written_tokens + b.uncached_tokens:,}", f"{b.cost_usd:.4f}"]
           for n, b in enumerate(result.turns, 1)],
          ["TURN", "PROMPT", "READ", "WRITTEN", "USD"])
    if result.compaction:
        click.echo(f"compaction before turn {compact_at}: "
                   f"{sum(b.cost_usd for b in result.compaction) + result.summary_cost_usd:.4f}"
                   " USD (summary call, summary, rebuilt prefix)")
    click.echo(f"profile {result.profile}: {result.input_tokens_total:,} input tokens, "
               f"{result.cost_usd:.2f} USD")


@cost.command("profiles")
@json_option()
def profiles_(as_json: bool) -> None:
    """The cache profiles the simulator knows."""
    known = list(profiles().values())
    output([p.to_json() for p in known], as_json, lambda: table(
        [[p.name, "no" if not p.caching else f"{p.read:g}×", f"{p.write:g}×",
          str(p.min_prefix_tokens), str(p.granularity),
          "-" if p.ttl_seconds is None else f"{p.ttl_seconds:g}s"] for p in known],
        ["PROFILE", "READ", "WRITE", "MIN_PREFIX", "STEP", "TTL"]))


@cost.command("replay")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(["sharegpt", "openai-jsonl"]), required=True,
              help="sharegpt records, or OpenAI messages (read as by import: docs/import.md).")
@billing_options("Cache profile to bill under.")
@click.option("--policy", "policies", multiple=True, type=click.Choice(list(POLICIES)),
              help="Assembly policies to compare (repeatable). Default: all.")
@click.option("--limit", type=click.IntRange(min=1), help="Replay at most this many.")
@json_option()
@pass_context
def replay_(ctx: Context, file: str, fmt: str, profile_name: str, input_price: float,
            policies: tuple[str, ...], limit: int | None, as_json: bool) -> None:
    """Replay real conversations turn by turn through assembly policies and price them."""
    data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    pricing = profile(profile_name)
    read = list(read_records(data, "sharegpt" if fmt == "sharegpt" else "openai-messages",
                             max_message_bytes=ctx.settings.max_message_bytes))
    records = [r for r in read if isinstance(r, ImportRecord)]
    skipped = [r for r in read if not isinstance(r, ImportRecord)]
    for bad in skipped:
        click.echo(f"skipped {bad.where}: {bad.error}", err=True)
    if limit is not None:
        records = records[:limit]
    tokenizer = default_tokenizer()
    show = not as_json and sys.stderr.isatty()
    bar = click.progressbar(length=len(records), label="replaying", file=sys.stderr) \
        if show else contextlib.nullcontext()
    with bar as progress:
        result = replay(((r.system, r.items) for r in records), tokenizer=tokenizer,
                        profile=pricing, input_price=input_price,
                        policies=policies or tuple(POLICIES),
                        progress=progress.update if progress is not None else None)
    output({**result.to_json(), "skipped": [b.to_json() for b in skipped]}, as_json,
           lambda: _print_replay(result, input_price))


def _print_replay(result: ReplayResult, input_price: float) -> None:
    table([[name, f"{t.prompt_tokens:,}", f"{t.reused_tokens:,}",
            f"{t.theoretical_reused_tokens:,}",
            f"{t.reused_tokens / t.theoretical_reused_tokens:.3f}"
            if t.theoretical_reused_tokens else "-", f"{t.cost_usd:.2f}",
            f"{t.uncached_cost_usd:.2f}", str(t.unexplained_misses)]
           for name, t in result.policies.items()],
          ["POLICY", "PROMPT", "REUSED", "BEST", "RATIO", "USD", "NO_CACHE_USD", "UNEXPLAINED"])
    click.echo(f"{result.conversations} conversations · tokenizer {result.tokenizer} · "
               f"{result.profile} at ${input_price}/M")
