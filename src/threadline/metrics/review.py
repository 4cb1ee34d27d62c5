"""The review queue's length, read from the store when scraped.

Flags are raised by whichever process runs the turn and resolved by whoever reviews (``threadline
review resolve``), so the queue is read from the log (``turn/review.py``) rather than counted
in memory. Reading it is a scan of every conversation's branches, so a scrape reuses the last
reading for ``refresh_s``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from threadline.stores.base import Store
from threadline.turn.review import queue


class ReviewCollector:
    def __init__(self, store: Store, *, refresh_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.refresh_s, self.clock = store, refresh_s, clock
        self._lock = threading.Lock()
        self._read: tuple[float, dict[str, int]] | None = None

    def counts(self) -> dict[str, int]:
        with self._lock:
            now = self.clock()
            if self._read is None or now - self._read[0] >= self.refresh_s:
                flags = queue(self.store, resolved=True)
                resolved = sum(f.resolved for f in flags)
                self._read = (now, {"open": len(flags) - resolved, "resolved": resolved})
            return self._read[1]

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("threadline_review_flags", "Conversations the trajectory "
                                   "monitor flagged for review, by state (open, resolved).",
                                   labels=["state"])
        for state, count in sorted(self.counts().items()):
            family.add_metric([state], count)
        yield family
