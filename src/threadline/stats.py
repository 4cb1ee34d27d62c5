"""Per-turn-index curves across conversations, from the call records (``threadline stats``).

A sample is one turn: a conversation's branch at a turn index, with every call recorded for
it. Its figures:

    ttft_ms        the first turn call's time to first token (what the user waited for)
    reuse_ratio    cached ÷ prompt tokens over the turn's calls, as the backend reported them
    prompt_tokens  the prompt tokens of the turn's calls (every round of a tool loop)
    cost_usd       every call of the turn (side calls too: constraint or memory extraction)
                   billed under a cache profile, as ``threadline cache report`` bills them

For each turn index (or, past ``PER_TURN_UP_TO`` indexes, each bucket of them: the buckets
the Prometheus metrics label turns with), the samples' median and 90th percentile and their
count. The 90th percentile interpolates between the nearest ranks (``statistics.quantiles``,
inclusive); a single sample is its own median and percentile.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from threadline.cache.pricing import CacheProfile
from threadline.cache.report import reuse_of
from threadline.calls import ModelCall
from threadline.errors import InputError
from threadline.stores.base import Store

# the turn-index buckets of metrics/turns.py (its module needs prometheus-client; a test
# holds the two equal), so a curve here and one drawn in Grafana line up
TURN_INDEX_BUCKETS = ((1, "1"), (5, "2-5"), (10, "6-10"), (20, "11-20"), (50, "21-50"))
LAST_TURN_BUCKET = "51+"
PER_TURN_UP_TO = 20  # "auto" shows each turn index up to this many, buckets past it
GROUPINGS = ("auto", "turn", "bucket")
METRICS = ("ttft_ms", "reuse_ratio", "prompt_tokens", "cost_usd")


@dataclass(frozen=True)
class TurnSample:
    conversation_id: str
    branch: str
    turn: int
    ttft_ms: float | None
    prompt_tokens: int
    cached_tokens: int
    cost_usd: float

    @property
    def reuse_ratio(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    def value(self, metric: str) -> float | None:
        found: float | None = getattr(self, metric)
        return found


@dataclass(frozen=True)
class Summary:
    count: int
    median: float | None
    p90: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        if not values:
            return cls(0, None, None)
        p90 = statistics.quantiles(values, n=10, method="inclusive")[8] \
            if len(values) > 1 else values[0]
        return cls(len(values), statistics.median(values), p90)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "median": self.median, "p90": self.p90}


@dataclass(frozen=True)
class TurnPoint:
    label: str   # the turn index, or its bucket ("2-5")
    turns: int   # samples: turns at this index (a conversation's branch each)
    conversations: int
    metrics: dict[str, Summary]

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.label, "turns": self.turns, "conversations": self.conversations,
                **{name: s.to_json() for name, s in self.metrics.items()}}


def turn_bucket(turn: int) -> str:
    for top, label in TURN_INDEX_BUCKETS:
        if turn <= top:
            return label
    return LAST_TURN_BUCKET


def since_of(text: str, now: datetime) -> datetime:
    """A moment from ``--since``: an ISO date or time (UTC unless it says otherwise), or a
    span back from ``now``: ``90m``, ``36h``, ``7d``."""
    span = re.fullmatch(r"\s*(\d+)\s*([mhd])\s*", text)
    if span:
        unit = {"m": "minutes", "h": "hours", "d": "days"}[span.group(2)]
        return now - timedelta(**{unit: int(span.group(1))})
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--since {text!r} is neither an ISO date or time nor a span",
                         hint="e.g. --since 2026-05-01, --since 2026-05-01T09:30, "
                              "--since 36h or --since 7d") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def turn_samples(store: Store, *, profile: CacheProfile, input_price: float,
                 conversations: Sequence[str] | None = None,
                 since: datetime | None = None) -> list[TurnSample]:
    """One sample per turn that made a turn call (since ``since``), in the conversations
    named (every one by default; an unknown id is an error before anything is counted)."""
    if conversations:
        for cid in conversations:
            store.conversation(cid)
        ids: Iterable[str] = conversations
    else:
        ids = [s.conversation.id for s in store.conversations()]
    out = []
    for cid in ids:
        calls = [c for c in store.calls(cid) if since is None or c.started_at >= since]
        turns: dict[tuple[str, int], list[tuple[ModelCall, float]]] = {}
        for row in reuse_of(calls, profile, input_price):
            turns.setdefault((row.call.branch, row.call.turn), []).append(
                (row.call, row.cost_usd))
        for (branch, turn), billed in turns.items():
            own = [call for call, _ in billed if call.purpose == "turn"]
            if not own:
                continue  # only side calls since ``since``: not a turn to chart
            ttft = next((c.timings.ttft_ms for c in own if c.timings.ttft_ms is not None), None)
            out.append(TurnSample(cid, branch, turn, ttft,
                                  sum(c.usage.prompt_tokens for c in own),
                                  sum(c.usage.cached_tokens for c in own),
                                  sum(cost for _, cost in billed)))
    return out


def curves(samples: Sequence[TurnSample], grouping: str = "auto") -> list[TurnPoint]:
    """The per-turn-index points, lowest index first."""
    if grouping not in GROUPINGS:
        raise InputError(f"unknown grouping {grouping!r}; choose one of: {', '.join(GROUPINGS)}")
    by_bucket = grouping == "bucket" or (
        grouping == "auto" and len({s.turn for s in samples}) > PER_TURN_UP_TO)
    label: Callable[[int], str] = turn_bucket if by_bucket else str
    groups: dict[str, list[TurnSample]] = {}
    for sample in sorted(samples, key=lambda s: s.turn):
        groups.setdefault(label(sample.turn), []).append(sample)
    return [TurnPoint(name, len(group), len({s.conversation_id for s in group}),
                      {metric: Summary.of([v for s in group
                                           if (v := s.value(metric)) is not None])
                       for metric in METRICS})
            for name, group in groups.items()]


_BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None]) -> str:
    """One character per value, from ▁ (zero) to █ (the highest); a gap for none. The scale
    starts at zero, as every figure here does, so a flat curve looks flat."""
    known = [v for v in values if v is not None]
    high = max(known, default=0.0)
    step = high / (len(_BLOCKS) - 1) if high > 0 else 0.0
    return "".join(" " if v is None else _BLOCKS[max(0, round(v / step)) if step else 0]
                   for v in values)
