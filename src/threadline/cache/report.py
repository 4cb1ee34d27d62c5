"""A conversation's prefix reuse and cost, call by call (``threadline cache report``).

A call whose provider reported its cache reads and writes (the Anthropic backend records them)
is billed from that report; any other from the prefix it shares with the call before it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from threadline.cache.prefix import PrefixCounts, PrefixReport
from threadline.cache.pricing import CacheProfile, reported_split
from threadline.calls import ModelCall


@dataclass(frozen=True)
class CallReuse:
    call: ModelCall
    prefix: PrefixReport | None
    reusable_tokens: int      # what the previous call on the branch would let a cache reuse
    estimated: bool           # reusable_tokens scaled from bytes (no token ids were recorded)
    cost_usd: float           # billed under the profile with that reuse
    uncached_cost_usd: float  # the same request with no cache at all
    # billed from the provider's own report of cache reads and writes (Anthropic's usage),
    # rather than from the prefix reuse
    from_usage: bool = False

    def to_json(self) -> dict[str, Any]:
        usage, prefix = self.call.usage, self.prefix
        return {"call_id": self.call.id, "branch": self.call.branch, "turn": self.call.turn,
                "status": str(self.call.status), "prompt_tokens": usage.prompt_tokens,
                "cached_tokens": usage.cached_tokens, "reused_tokens": self.reusable_tokens,
                "reuse_estimated": self.estimated, "reused_from": self.call.reused_from,
                "ratio": None if prefix is None else round(prefix.ratio, 4),
                "best_ratio": None if prefix is None else round(prefix.best_ratio, 4),
                "cause": None if prefix is None else str(prefix.cause),
                "expected": None if prefix is None else prefix.expected,
                "detail": None if prefix is None else prefix.detail,
                "divergence": None if prefix is None or prefix.divergence is None
                else prefix.divergence.to_json(),
                "cost_usd": round(self.cost_usd, 6),
                "uncached_cost_usd": round(self.uncached_cost_usd, 6),
                "billed_from": "reported usage" if self.from_usage else "prefix reuse"}


def reuse_of(calls: Sequence[ModelCall], profile: CacheProfile,
             input_price: float) -> list[CallReuse]:
    out = []
    for call in calls:
        prefix = None if call.prefix is None else PrefixReport.from_json(call.prefix)
        split = reported_split(call.response)
        reusable, estimated, cost, uncached = price(call.usage.prompt_tokens, prefix, split,
                                                    profile, input_price)
        out.append(CallReuse(call, prefix, reusable, estimated, cost, uncached,
                             from_usage=split is not None))
    return out


def price(tokens: int, prefix: PrefixCounts | None, split: tuple[int, int, int] | None,
          profile: CacheProfile, input_price: float) -> tuple[int, bool, float, float]:
    """One call's reusable tokens, whether they were estimated, its cost under the profile and
    its cost with no cache at all; ``split`` is ``reported_split`` of its response."""
    estimated = False
    if prefix is None:
        reusable = 0
    elif prefix.reused_tokens is not None:
        reusable = prefix.reused_tokens
    else:  # no token ids recorded: scale the byte-level reuse to the token count
        estimated = True
        reusable = round(tokens * prefix.reused_bytes / prefix.prompt_bytes) \
            if prefix.prompt_bytes else 0
    cost = profile.cost(tokens, reusable, input_price) if split is None \
        else profile.bill_usage(*split, input_price).cost_usd
    return reusable, estimated, cost, tokens * input_price / 1e6


def chart(rows: Sequence[CallReuse], width: int = 30) -> list[str]:
    """A terminal chart: reuse per call as a bar (█ reused, ░ re-sent), with its cost."""
    lines = []
    for row in rows:
        ratio = 0.0 if row.prefix is None else row.prefix.ratio
        filled = round(ratio * width)
        mark = "" if row.prefix is None or row.prefix.expected else f"  ← {row.prefix.cause}"
        lines.append(f"turn {row.call.turn:>3} {row.call.branch:<6} "
                     f"{'█' * filled}{'░' * (width - filled)} {ratio:5.0%}  "
                     f"${row.cost_usd:.4f}{mark}")
    return lines
