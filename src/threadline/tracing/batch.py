"""Recorded turns described and handed to their sink in batches, off the turns' threads.

A turn ends by putting what it recorded on a queue: one append. A thread of the tracer's
wakes every ``interval_s`` (sooner once ``max_turns`` wait), describes what waits as the
live tracer would (``Recorder.described``) and hands the batch to the sink. Described one
after another, the turns' spans cost the process a fraction of what describing each as its
turn ends costs (the describing code stays hot in the CPU's caches), and the thread takes
the GIL a few times a second rather than at every turn. Past ``max_waiting`` turns (the
thread cannot keep up) a turn's spans are dropped and counted, as the SDK's batch
processor drops spans when its queue is full. A process forked from this one starts a thread
of its own, and leaves the turns that were waiting to the parent.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from threadline.tracing.sink import RecordedTurn, Sink

log = logging.getLogger("threadline.trace")

T = TypeVar("T")


class Batches(Generic[T]):
    """Turns (``T``, as recorded) described by ``describe`` and exported to ``sink``."""

    def __init__(self, describe: Callable[[T], RecordedTurn], sink: Sink, *,
                 interval_s: float = 0.5, max_turns: int = 512,
                 max_waiting: int = 20_000) -> None:
        self.describe, self.sink = describe, sink
        self.interval_s, self.max_turns, self.max_waiting = interval_s, max_turns, max_waiting
        self.dropped = 0
        self.spent_s = 0.0  # CPU time describing and exporting (this thread's, or a flush's)
        self._stopped = False
        self._begin()
        os.register_at_fork(after_in_child=functools.partial(_in_child, weakref.ref(self)))

    def _begin(self) -> None:
        self._waiting: deque[T] = deque()
        self._lock = threading.Lock()  # one batch described and exported at a time
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="threadline-spans",
                                        daemon=True)
        if not self._stopped:
            self._thread.start()

    def _forked(self) -> None:
        """In a child just forked: the thread is gone, its lock may have been held, and the
        turns waiting are the parent's to export."""
        self._begin()

    def add(self, turn: T) -> None:
        """A turn that ended (called on the turn's thread: costs an append)."""
        waiting = len(self._waiting)
        if self._stopped or waiting >= self.max_waiting:
            if self.dropped == 0 and not self._stopped:
                log.warning("%d turns' spans are waiting to be exported; dropping turns",
                            waiting)
            self.dropped += 1
            return
        self._waiting.append(turn)
        if waiting + 1 == self.max_turns:
            self._wake.set()

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait(self.interval_s)
            self._wake.clear()
            self.export()

    def export(self) -> None:
        """Describe and export what waits now."""
        with self._lock:
            started = time.thread_time()
            turns = []
            while True:
                try:
                    waiting = self._waiting.popleft()
                except IndexError:
                    break
                try:
                    turns.append(self.describe(waiting))
                except Exception:  # noqa: BLE001 - one bad turn never stops the others
                    log.exception("tracer failed to describe a turn's spans")
            try:
                self.sink.export(turns)  # also with none: a sink may have some to write out
            except Exception:  # noqa: BLE001
                log.exception("tracer failed to export %d turns' spans", len(turns))
            self.spent_s += time.thread_time() - started

    def flush(self, timeout_ms: int) -> bool:
        self.export()
        return self.sink.flush(timeout_ms)

    def shutdown(self) -> None:
        """Export what waits, stop the thread and the sink; later turns are dropped."""
        if self._stopped:
            return
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        self.export()
        self.sink.shutdown()


def _in_child(batches: weakref.ref[Batches[Any]]) -> None:
    found = batches()
    if found is not None:
        found._forked()
