"""The metric families and what feeds them: a turn hook, the engine's observer, and the
memory writer's queue read at scrape time.

Labels stay bounded: statuses, purposes, strategies, reasons, decisions and error types are
names the code defines, and the turn index is bucketed; no conversation, branch or user id is
ever a label (a conversation's own curve is in its call records, not here).
"""

from __future__ import annotations

import logging

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

from threadline.items import Item
from threadline.metrics.memory import MemoryCollector
from threadline.metrics.review import ReviewCollector
from threadline.metrics.traces import TraceCollector, TraceCounts
from threadline.metrics.turns import TurnCounts
from threadline.stores.base import Store
from threadline.turn.hooks import TurnEvent

log = logging.getLogger("threadline.metrics")

WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Metrics:
    """Every family threadline exports, in a registry of its own. Feed it with ``hook`` (add
    it to the engine's hooks) and as the engine's ``observer``; ``watch_memory`` adds the
    memory writer's figures, ``watch_traces`` what the span recorder dropped;
    ``exposition`` is what ``GET /metrics`` answers."""

    content_type = CONTENT_TYPE_LATEST  # the text exposition format

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.turns = TurnCounts()  # what every turn feeds (turns.py: cheap on the turn path)
        registry.register(self.turns)
        # what happens now and then: prometheus-client's own counters are cheap enough
        self.compactions = Counter("threadline_compactions", "Compactions applied on their own "
                                   "before a call, by strategy and reason.",
                                   ["strategy", "reason"], registry=registry)
        self.lease_wait = Histogram("threadline_lease_wait_seconds", "How long turns that "
                                    "found their conversation busy waited for its lease.",
                                    buckets=WAIT_BUCKETS, registry=registry)
        self.lease_rejects = Counter("threadline_lease_rejects", "Turns refused the lease: "
                                     "busy (on_busy=reject) or timeout (waited past wait_s).",
                                     ["reason"], registry=registry)
        self.lease_cancels = Counter("threadline_lease_cancels", "Cancels asked of a running "
                                     "turn by a newer message (on_busy=cancel).",
                                     registry=registry)
        self.errors = Counter("threadline_errors", "Errors raised by turns, by type.", ["type"],
                              registry=registry)
        for reason in ("busy", "timeout"):  # there from the start, at 0
            self.lease_rejects.labels(reason)
        self.hook = MetricsHook(self)

    def watch_memory(self, store: Store, *, refresh_s: float = 30.0) -> None:
        """Export the memory writer's decisions, queue and extraction validity, read from
        ``store`` at most every ``refresh_s`` (the writer runs in any process: ``threadline
        memory learn``). A store that keeps no memory adds nothing."""
        if store.memory is not None:
            self.registry.register(MemoryCollector(store, refresh_s=refresh_s))

    def watch_monitor(self, store: Store | None = None, *, refresh_s: float = 60.0) -> None:
        """Count the trajectory monitor's decisions by action (``threadline_monitor_decisions``);
        each turn's items are then read once, so only where a monitor runs. With ``store``,
        also the review queue's open and resolved flags (``threadline_review_flags``), read
        from it at most every ``refresh_s``."""
        self.turns.watch_monitor = True
        if store is not None:
            self.registry.register(ReviewCollector(store, refresh_s=refresh_s))

    def watch_traces(self, counts: TraceCounts) -> None:
        """Export what a recording ``Tracing`` dropped and how often its span relay was
        started again (``threadline_trace_dropped_turns``,
        ``threadline_trace_relay_restarts``)."""
        self.registry.register(TraceCollector(counts))

    def exposition(self) -> bytes:
        """Every family, in the Prometheus text format (``content_type``)."""
        return generate_latest(self.registry)

    def record_turn(self, event: TurnEvent) -> None:
        """What a turn hook sees: the turn, its calls, their tokens and timings."""
        self.turns.record(event)

    # -- the engine's observer (turn/observe.py) ------------------------------------------

    def lease_waited(self, seconds: float) -> None:
        self.lease_wait.observe(seconds)

    def lease_refused(self, reason: str) -> None:
        self.lease_rejects.labels(reason).inc()

    def cancel_requested(self) -> None:
        self.lease_cancels.inc()

    def compacted(self, item: Item) -> None:
        self.compactions.labels(str(item.content.get("strategy", "unknown")),
                                str(item.content.get("reason", "unknown"))).inc()

    def turn_raised(self, error: BaseException) -> None:
        self.errors.labels(type(error).__name__).inc()


class MetricsHook:
    """The turn hook that feeds ``metrics``. A failure is logged and dropped: unlike other
    hooks', it is not noted on the branch, so broken telemetry never writes to the log."""

    name = "metrics"
    uses_user = False

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def after_turn(self, event: TurnEvent) -> None:
        try:
            self.metrics.record_turn(event)
        except Exception:  # noqa: BLE001 - telemetry never fails a turn, nor writes to it
            log.exception("metrics: could not record a turn")
