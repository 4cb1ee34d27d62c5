"""What every turn feeds: counted in plain numbers under one lock, exported when scraped.

A turn's figures (its status, each call's status and tokens, its time to first token and its
duration) are a dozen increments. As prometheus-client's own counters and histograms, each
takes a lock of its own and costs a few microseconds, tens of them per turn; here they take
one lock and a few dict and list updates, and the families are built only when scraped.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from threadline.errors import TurnCancelled
from threadline.turn import monitoring
from threadline.turn.delegate import DELEGATE
from threadline.turn.hooks import TurnEvent

# turn index (1-based) → its bucket label; coarse enough to stay a handful of series, fine
# enough that the curve of time to first token against the turn index can be drawn
TURN_INDEX_BUCKETS = ((1, "1"), (5, "2-5"), (10, "6-10"), (20, "11-20"), (50, "21-50"))
LAST_TURN_BUCKET = "51+"
TURN_INDEXES = tuple(label for _, label in TURN_INDEX_BUCKETS) + (LAST_TURN_BUCKET,)
TURN_STATUSES = ("ok", "failed", "cancelled")
DELEGATION_STATUSES = ("done", "failed")
DELEGATED_TOKENS = ("prompt", "cached", "output")

TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TURN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def turn_index_bucket(turn: int) -> str:
    """The label of turn ``turn``'s bucket: 1, 2-5, 6-10, 11-20, 21-50 or 51+."""
    for top, label in TURN_INDEX_BUCKETS:
        if turn <= top:
            return label
    return LAST_TURN_BUCKET


def turn_status(error: BaseException | None) -> str:
    if error is None:
        return "ok"
    return "cancelled" if isinstance(error, TurnCancelled) else "failed"


class Buckets:
    """One histogram series: counts per bucket (not cumulative; the last is +Inf) and sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bound ≥ value: le
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        out, running = [], 0
        for bound, count in zip([*map(str, self.bounds), "+Inf"], self.counts, strict=True):
            running += count
            out.append((bound, float(running)))
        return out


class TurnCounts:
    """The per-turn families, as one collector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.turns = dict.fromkeys(TURN_STATUSES, 0)
        self.calls: dict[tuple[str, str], int] = {}
        self.prompt = self.cached = self.output = 0
        self.ttft = {label: Buckets(TTFT_BUCKETS) for label in TURN_INDEXES}
        self.duration = {label: Buckets(TURN_BUCKETS) for label in TURN_INDEXES}
        # a delegation's own calls count as its child's turns; these say what they were for
        self.delegations = dict.fromkeys(DELEGATION_STATUSES, 0)
        self.delegated = dict.fromkeys(DELEGATED_TOKENS, 0)
        # the trajectory monitor's decisions by action (read from the turn's items, so only
        # where a monitor runs: ``Metrics.watch_monitor``)
        self.watch_monitor = False
        self.monitor = dict.fromkeys((monitoring.ALLOW, *monitoring.ACTIONS), 0)

    def record(self, event: TurnEvent) -> None:
        index = turn_index_bucket(event.message.turn)
        status = turn_status(event.error)
        first_ttft = None
        calls = []
        prompt = cached = output = 0
        for call in event.calls:
            if first_ttft is None and call.purpose == "turn":
                first_ttft = call.timings.ttft_ms
            calls.append((call.status.value, call.purpose))
            usage = call.usage
            prompt += usage.prompt_tokens
            cached += usage.cached_tokens
            output += usage.completion_tokens
        decided = [label for item in event.items for found in [monitoring.decision(item)]
                   if found is not None for label in monitoring.labels(found)] \
            if self.watch_monitor else []
        delegations = [] if event.result is None else [
            item.content for item in event.result.tool_results
            if item.content.get("tool") == DELEGATE]
        with self._lock:
            self.turns[status] += 1
            for content in delegations:
                details = content.get("details")
                self.delegations["failed" if details is None else "done"] += 1
                if details is not None:
                    for kind in DELEGATED_TOKENS:
                        self.delegated[kind] += int(details[f"{kind}_tokens"])
            for label in decided:
                self.monitor[label] += 1
            for key in calls:
                self.calls[key] = self.calls.get(key, 0) + 1
            self.prompt += prompt
            self.cached += cached
            self.output += output
            if event.elapsed_s is not None:
                self.duration[index].observe(event.elapsed_s)
            if first_ttft is not None:
                self.ttft[index].observe(first_ttft / 1000)

    def hit_ratio(self) -> float:
        with self._lock:
            return self.cached / self.prompt if self.prompt else math.nan

    def collect(self) -> Iterator[Metric]:
        with self._lock:  # one consistent reading
            turns, calls = dict(self.turns), dict(self.calls)
            delegations, delegated = dict(self.delegations), dict(self.delegated)
            monitor = dict(self.monitor) if self.watch_monitor else {}
            tokens = (self.prompt, self.cached, self.output)
            ttft = {label: (b.cumulative(), b.total) for label, b in self.ttft.items()}
            duration = {label: (b.cumulative(), b.total) for label, b in self.duration.items()}
        yield _counted("threadline_turns", "Turns that wrote their message, by how they "
                       "ended.", "status", turns)
        if monitor:
            yield _counted("threadline_monitor_decisions", "The trajectory monitor's "
                           "decisions, by action (allow: none asked for; a decision may ask "
                           "for several).", "action", monitor)
        family = CounterMetricFamily("threadline_model_calls", "Model calls, by status and "
                                     "purpose (turn, or a side call such as compaction).",
                                     labels=["status", "purpose"])
        for (status, purpose), count in sorted(calls.items()):
            family.add_metric([status, purpose], count)
        yield family
        yield _counted("threadline_delegations", "Tasks a turn delegated to a sub-agent, by "
                       "outcome (done: its answer returned).", "status", delegations)
        yield _counted("threadline_delegated_tokens", "Tokens the sub-agents of finished "
                       "delegations spent (their own turns count them too), by kind.", "kind",
                       delegated)
        for name, text, value in zip(
                ("threadline_prompt_tokens", "threadline_cached_tokens",
                 "threadline_output_tokens"),
                ("Prompt tokens sent to the model, cached ones included.",
                 "Prompt tokens the model reused from its cache.",
                 "Tokens the model generated."), tokens, strict=True):
            yield CounterMetricFamily(name, text, value=value)
        yield GaugeMetricFamily("threadline_cache_hit_ratio", "Cached ÷ prompt tokens since "
                                "the process started (NaN before any call); over a window, "
                                "divide the rates of the two counters.",
                                value=tokens[1] / tokens[0] if tokens[0] else math.nan)
        for name, text, series in (
                ("threadline_ttft_seconds", "Time to the first token of each turn's first "
                 "model call, by turn-index bucket.", ttft),
                ("threadline_turn_duration_seconds", "Turn time, from the call that began it "
                 "(lease wait included) to its hooks, by turn-index bucket.", duration)):
            histogram = HistogramMetricFamily(name, text, labels=["turn_index"])
            for label, (buckets, total) in series.items():
                histogram.add_metric([label], buckets, total)
            yield histogram


def _counted(name: str, text: str, label: str, counts: Mapping[str, int]) -> Metric:
    """A counter family with one label, a sample per key of ``counts``."""
    family = CounterMetricFamily(name, text, labels=[label])
    for key, count in counts.items():
        family.add_metric([key], count)
    return family
