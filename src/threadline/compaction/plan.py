"""A compaction plan, what it costs, and when one is worth doing.

A planner is a pure function from a branch's items to a :class:`Plan`: what would leave the
view, how many tokens the next request would send before and after, and the price of doing it
now against carrying on appending (seed 000 §7). Nothing changes until the plan is applied, which
appends one ``compaction`` item.

The trigger :class:`Policy` is high/low water marks in tokens plus a hard limit from the model's
context window. Past the high-water mark the lightest planner that reaches the low-water mark
wins: clearing stale tool results first, then dropping whole old turns (with a recall-first
summary of them, unless the policy turns summaries off). Past the high-water mark but below the
hard limit, a plan is applied only if its price says it pays for itself over the policy's
horizon; at the hard limit it is applied regardless.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.cache.pricing import CacheProfile, profile
from threadline.items import ItemKind, NewItem
from threadline.models.base import ModelBackend, estimate_tokens
from threadline.request import Message, Request

Count = Callable[[str], int]  # tokens in a text, by the model's tokenizer or a stand-in
MESSAGE_OVERHEAD = 4  # role header and separators a chat template adds per message
word_count = estimate_tokens  # what planning counts with where the model cannot say


def request_tokens(request: Request, count: Count) -> list[tuple[Message, int]]:
    """Each message of ``request`` with its token count (tools are counted as one message)."""
    out = [(Message("system", "tools"), sum(count(t.name + t.description) for t in
                                             request.tools))] if request.tools else []
    for message in request.messages:
        text = message.content + "".join(c.name + str(c.arguments) for c in message.tool_calls)
        out.append((message, count(text) + MESSAGE_OVERHEAD))
    return out


@dataclass(frozen=True)
class Policy:
    """When to compact and how far. Token figures count the whole request."""

    high_water: int = 6_000
    low_water: int = 3_000
    context_window: int | None = None  # the hard limit: never send more than this …
    reserve: int = 512                 # … minus room for the reply
    keep_tool_results: int = 3         # the newest call/result pairs are never cleared
    clear_at_least: int = 1_000        # no reset for clearing fewer tokens than this
    exclude_tools: frozenset[str] = frozenset()
    summarize: bool = True             # dropped turns leave a recall-first summary
    keep_turns: int = 1                # completed turns that always stay verbatim
    profile: str = "anthropic-5m"      # the cache pricing the decision uses
    input_price: float = 3.0           # USD per million input tokens
    horizon_turns: int = 10            # turns over which a plan must pay for itself
    tokens_per_turn: int = 400         # expected growth per turn, for that horizon

    def __post_init__(self) -> None:
        if not 0 < self.low_water < self.high_water:
            raise ValueError("the low-water mark must be positive and below the high-water mark")

    @property
    def hard_limit(self) -> int | None:
        return None if self.context_window is None else self.context_window - self.reserve


def policy_for(model: ModelBackend) -> Policy | None:
    """The default policy for a model that declares its context window (llama.cpp does):
    compact past three quarters of it, down to two fifths, never past the window. Its price is
    the idealised cache (reads at a tenth, writes at list price), which is what reusing a local
    KV cache costs in prefill time."""
    window = model.context_window
    if window is None or window < 1_024:
        return None
    return Policy(high_water=window * 3 // 4, low_water=window * 2 // 5, context_window=window,
                  reserve=min(512, window // 8), profile="ideal")


@dataclass(frozen=True)
class Price:
    """Carrying on versus compacting now, over the same horizon (USD)."""

    append_usd: float
    compact_usd: float
    horizon_turns: int
    profile: str

    @property
    def pays_off(self) -> bool:
        return self.compact_usd < self.append_usd

    def to_json(self) -> dict[str, Any]:
        return {"append_usd": round(self.append_usd, 6), "compact_usd": round(self.compact_usd, 6),
                "horizon_turns": self.horizon_turns, "profile": self.profile,
                "pays_off": self.pays_off}


def price(*, before: int, after: int, kept_prefix: int, policy: Policy,
          summary_call_tokens: int = 0) -> Price:
    """Seed 000 §7's arithmetic: appending reads the whole previous request from the cache and
    writes each turn's new tokens; compacting rewrites everything after ``kept_prefix`` once
    (plus the summary call, if a model writes it) and then appends to the smaller context."""
    cache: CacheProfile = profile(policy.profile)
    rate, grow = policy.input_price, policy.tokens_per_turn

    def run(context: int, cached: int) -> float:
        total = 0.0
        for _ in range(policy.horizon_turns):
            total += cache.bill(context + grow, cached, rate).cost_usd
            context = cached = context + grow
        return total

    summary = 0.0 if not summary_call_tokens else cache.bill(before, before, rate).cost_usd
    return Price(append_usd=run(before, before), compact_usd=summary + run(after, kept_prefix),
                 horizon_turns=policy.horizon_turns, profile=cache.name)


@dataclass(frozen=True)
class Plan:
    strategy: str                   # clear_tool_results | window | summary | pin
    reason: str                     # manual | high_water | context_limit | task_boundary
    tokens_before: int
    tokens_after: int
    kept_prefix: int                # tokens before the first change: still cached afterwards
    price: Price
    through_seq: int | None = None  # window, summary: items up to here leave the view
    cleared: tuple[int, ...] = ()   # clear_tool_results: the tool results cleared
    summary: str | None = None
    pinned: tuple[int, ...] = ()    # the constraints pinned from now on
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_item(self) -> NewItem:
        content: dict[str, Any] = {"strategy": self.strategy, "reason": self.reason,
                                   "pinned": list(self.pinned), "estimate": self.estimate()}
        if self.through_seq is not None:
            content["through_seq"] = self.through_seq
        if self.cleared:
            content["cleared"] = list(self.cleared)
        if self.summary is not None:
            content["summary"] = self.summary
        return NewItem(ItemKind.COMPACTION, content)

    def estimate(self) -> dict[str, Any]:
        return {"tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
                "kept_prefix_tokens": self.kept_prefix, "price": self.price.to_json()}

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "reason": self.reason, "saved_tokens": self.saved,
                **self.estimate(), "through_seq": self.through_seq, "cleared": list(self.cleared),
                "summary": self.summary, "pinned": list(self.pinned), "notes": list(self.notes)}


def kept_prefix(measured: Sequence[tuple[Message, int]], changed: Callable[[Message], bool]
                ) -> int:
    """Tokens before the first message the plan changes: what stays cached across it."""
    total = 0
    for message, tokens in measured:
        if changed(message):
            break
        total += tokens
    return total
