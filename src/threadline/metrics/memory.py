"""The memory writer's figures, read from the store when scraped.

The writer runs wherever ``threadline memory learn`` (or a ``MemoryWriter``) runs, often not
in the serving process, so its counts are read from where it records them, the queue in the
store, rather than counted in memory; they are gauges, because forgetting a user deletes that
user's jobs. Reading the queue costs a scan of it, so a scrape reuses the last reading for
``refresh_s``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from threadline.memory.store import MemoryStore
from threadline.memory.writer import MemoryWriter
from threadline.stores.base import Store

JOB_STATUSES = ("pending", "done", "failed")


class MemoryCollector:
    def __init__(self, store: Store, *, refresh_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.writer = MemoryWriter(store, MemoryStore(store))
        self.refresh_s, self.clock = refresh_s, clock
        self._lock = threading.Lock()
        self._read: tuple[float, dict[str, Any]] | None = None

    def stats(self) -> dict[str, Any]:
        with self._lock:
            now = self.clock()
            if self._read is None or now - self._read[0] >= self.refresh_s:
                self._read = (now, self.writer.stats())
            return self._read[1]

    def collect(self) -> Iterator[Metric]:
        stats = self.stats()
        writes = GaugeMetricFamily("threadline_memory_writes", "Decisions the memory writer "
                                   "recorded over the jobs in the store (ADD, UPDATE, "
                                   "INVALIDATE, NOOP, REJECT, TURN).", labels=["decision"])
        for decision, count in sorted(stats["decisions"].items()):
            writes.add_metric([decision], count)
        yield writes
        jobs = GaugeMetricFamily("threadline_memory_jobs", "The memory writer's queue, by "
                                 "status.", labels=["status"])
        statuses = stats["statuses"]
        for status in sorted({*JOB_STATUSES, *statuses}):
            jobs.add_metric([status], statuses.get(status, 0))
        yield jobs
        yield GaugeMetricFamily("threadline_memory_extraction_outputs", "Answers of the "
                                "model extractor the writer checked against its schema.",
                                value=stats["model_outputs"])
        rate = stats["schema_validity_rate"]
        yield GaugeMetricFamily("threadline_memory_extraction_schema_validity_ratio",
                                "Share of the model extractor's answers that were "
                                "schema-valid (NaN before any).",
                                value=math.nan if rate is None else rate)
