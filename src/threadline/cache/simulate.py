"""The bill for a conversation that has not happened yet: N turns, priced turn by turn.

Turn n sends the preamble plus the warm context plus n turns of ``tokens_per_turn``; whatever
the previous request sent is in the cache (the last breakpoint moves to the newest turn), so
each turn reads the previous request and writes its own new tokens. Warm tokens are context
already sent and cached before the first simulated turn.

A compaction before turn ``compact_at`` is priced as the arithmetic of seed 000 §7 does it:
one call that reads the whole current context (from the cache) and writes a summary of
``summary_tokens`` at the output price, then the new prefix of ``compact_to`` tokens written to
the cache at once; turns then append to that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from threadline.cache.pricing import Bill, CacheProfile
from threadline.errors import InputError


@dataclass(frozen=True)
class Scenario:
    turns: int
    tokens_per_turn: int
    input_price: float            # USD per million input tokens
    output_price: float = 0.0     # USD per million output tokens (the compaction summary)
    preamble_tokens: int = 0
    warm_tokens: int = 0
    compact_at: int | None = None
    compact_to: int | None = None
    summary_tokens: int = 0
    model: str | None = None

    def __post_init__(self) -> None:
        if self.turns < 1 or self.tokens_per_turn < 1:
            raise InputError("a scenario needs at least one turn of at least one token")
        if min(self.preamble_tokens, self.warm_tokens, self.summary_tokens) < 0 \
                or self.input_price < 0 or self.output_price < 0:
            raise InputError("token counts and prices cannot be negative")
        if (self.compact_at is None) != (self.compact_to is None):
            raise InputError("--compact-at and --compact-to go together",
                             hint="give both, or neither")
        if self.compact_at is not None and not 1 <= self.compact_at <= self.turns:
            raise InputError(f"--compact-at must be a turn between 1 and {self.turns}")
        if self.compact_to is not None and self.compact_to < 1:
            raise InputError("--compact-to must be at least one token")


@dataclass(frozen=True)
class Simulation:
    profile: str
    turns: list[Bill]
    compaction: list[Bill] = field(default_factory=list)  # the summary call, the rebuilt prefix
    summary_cost_usd: float = 0.0

    @property
    def input_tokens_total(self) -> int:
        return sum(b.prompt_tokens for b in self.turns + self.compaction)

    @property
    def cost_usd(self) -> float:
        return sum(b.cost_usd for b in self.turns + self.compaction) + self.summary_cost_usd

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "input_tokens_total": self.input_tokens_total,
                "cost_usd": round(self.cost_usd, 6),
                "turn_input_tokens": sum(b.prompt_tokens for b in self.turns),
                "read_tokens": sum(b.read_tokens for b in self.turns + self.compaction),
                "compaction": None if not self.compaction else {
                    "calls": [b.to_json() for b in self.compaction],
                    "summary_cost_usd": round(self.summary_cost_usd, 6)},
                "turns": [{"turn": n, **b.to_json()} for n, b in enumerate(self.turns, 1)]}


def simulate(scenario: Scenario, profile: CacheProfile) -> Simulation:
    s = scenario
    context = s.preamble_tokens + s.warm_tokens
    cached = context if s.warm_tokens else 0
    turns: list[Bill] = []
    compaction: list[Bill] = []
    summary_cost = 0.0
    for n in range(1, s.turns + 1):
        if n == s.compact_at:
            assert s.compact_to is not None
            compaction.append(profile.bill(context, cached, s.input_price, model=s.model))
            summary_cost = s.summary_tokens * s.output_price / 1e6
            context = s.compact_to
            compaction.append(profile.bill(context, 0, s.input_price, model=s.model))
            cached = context
        request = context + s.tokens_per_turn
        turns.append(profile.bill(request, cached, s.input_price, model=s.model))
        context = cached = request
    return Simulation(profile.name, turns, compaction, summary_cost)
