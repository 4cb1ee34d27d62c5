"""What the span recorder could not export, read when scraped: traced turns whose spans were
dropped (its queue full, or its relay process behind or gone) and how often the relay was
started again (``tracing/batch.py``, ``tracing/relay.py``). Spans a receiver refused are the
exporter's to report; these are the ones that never reached it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, Metric


class TraceCounts(Protocol):
    """What a recording ``Tracing`` (``tracing/setup.py``) counts."""

    @property
    def dropped_turns(self) -> int: ...

    @property
    def relay_restarts(self) -> int: ...


class TraceCollector:
    def __init__(self, counts: TraceCounts) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "threadline_trace_dropped_turns", "Traced turns whose spans were dropped: the "
            "recorder's queue was full, or its span relay was behind or gone.",
            value=self.counts.dropped_turns)
        yield CounterMetricFamily(
            "threadline_trace_relay_restarts", "Times the span relay process was started "
            "again after it exited.", value=self.counts.relay_restarts)
