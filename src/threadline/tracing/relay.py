"""The span relay: recorded turns (``recorder.py``) built into the SDK's spans and exported
from a process of their own, so that neither building spans nor encoding them for OTLP
takes the turn's process's GIL.

``Relay`` is the sink ``Tracing.from_config`` hands turns to: it starts ``python -m
threadline.tracing.relay`` with the same environment (the OTEL_* variables: exporter,
endpoint, headers, resource, limits) and writes each batch of turns to its standard input
as one frame, a 4-byte big-endian length and the ``marshal`` of the turns. The write never
waits for the relay: the pipe is non-blocking, what it cannot take yet waits in a buffer
for the next batch, and past ``MAX_WAITING`` bytes a batch is dropped and counted, as the
SDK's batch processor drops spans when its queue is full. A frame of length 0 asks the relay
to flush; it answers on a pipe of its own, where it first says it is ready (nothing is
written to it before: a command that ends sooner exports its turns itself). End of input
(``shutdown``, or this process gone) makes it export what it holds and exit.

The relay is itself the batch processor: it exports each batch it reads, in calls of at most
OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans, to each exporter the configuration names, and reads
the next once that is done (while an exporter waits for a receiver, turns wait in the pipe
and the buffer above).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import marshal
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from typing import BinaryIO

from threadline.tracing.sink import RecordedTurn

log = logging.getLogger("threadline.trace")

MAX_WAITING = 16 << 20  # bytes of turns waiting for the relay before turns are dropped
PIPE_BYTES = 1 << 20  # the pipe's own buffer, where the system allows it
RESTART_S = 5.0  # a relay that exited is started again, at most this often
FLUSH = (0).to_bytes(4, "big")
READY = b"r"  # the relay's first answer: its exporters are built, it reads from now on
_SET_PIPE_SIZE = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_INHERITED: list[subprocess.Popen[bytes]] = []  # a forked parent's relays: not ours to reap


class Relay:
    """Turns written to a relay process exporting to ``exporters`` (``otlp``, ``console``).

    A relay that exited (killed, or out of memory) is logged, the turns meanwhile are dropped
    and counted, and another is started at the next batch, at most every ``RESTART_S``. A
    process forked from this one (a pre-forking server) starts a relay of its own at its
    first batch: the parent's pipe is left to the parent, and what the parent had queued is
    the parent's to export."""

    def __init__(self, exporters: Sequence[str]) -> None:
        self.exporters = tuple(exporters)
        self._lock = threading.Lock()
        # turns known not to be exported: the relay fell behind, or was gone (what it had read
        # and not exported when it died is not known here)
        self.dropped = 0
        self.restarts = 0
        self._start()
        os.register_at_fork(after_in_child=functools.partial(_in_child, weakref.ref(self)))

    def _start(self) -> None:
        answers, answering = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "threadline.tracing.relay", str(answering),
             *self.exporters], stdin=subprocess.PIPE, pass_fds=(answering,))
        os.close(answering)
        self._answers = answers
        assert self.process.stdin is not None
        self._pipe = self.process.stdin.fileno()
        os.set_blocking(self._pipe, False)
        with contextlib.suppress(OSError):  # a smaller pipe only means more waits in the buffer
            fcntl.fcntl(self._pipe, _SET_PIPE_SIZE, PIPE_BYTES)
        os.set_blocking(answers, False)
        self._asked = 0  # flushes asked for: an answer that came too late is not the next's
        self._answer = b""  # the last flush's
        self._ready = False  # nothing is written to it before it says it is ready
        self._waiting = bytearray()
        self._unsent = 0  # turns whose frames are (in part) in ``_waiting``
        self._gone = False
        self._inherited = False
        self._started = time.monotonic()

    def _forked(self) -> None:
        """In a child just forked: the parent's lock may have been held, and its pipe and what
        waits for it are the parent's."""
        self._lock = threading.Lock()
        self._waiting = bytearray()
        self._unsent = 0
        self._gone = self._inherited = True

    def _restart(self) -> None:
        """Close this process's ends of the old relay's pipes, and start another."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        with contextlib.suppress(OSError):
            os.close(self._answers)
        if self._inherited:
            _INHERITED.append(self.process)
        else:
            self.process.wait()
            self.restarts += 1
            log.warning("starting the span relay again (%d turns' spans were dropped)",
                        self.dropped)
        self._start()

    def export(self, turns: Sequence[RecordedTurn]) -> None:
        data = marshal.dumps(list(turns)) if turns else b""
        with self._lock:
            if self._gone and (self._inherited or
                               time.monotonic() - self._started >= RESTART_S):
                self._restart()
            if data and (self._gone or len(self._waiting) + len(data) > MAX_WAITING):
                self._drop(len(turns))
            elif data:
                self._waiting += len(data).to_bytes(4, "big")
                self._waiting += data
                self._unsent += len(turns)
            if not self._ready and not self._gone:
                self._answers_now(0)
            if self._waiting and self._ready and not self._gone:
                self._write()

    def _drop(self, turns: int) -> None:
        if self.dropped == 0:
            log.warning("the span relay %s; dropping turns' spans", "is gone" if self._gone
                        else f"is {len(self._waiting)} bytes behind")
        self.dropped += turns

    def _write(self) -> None:
        """As much of what waits as the pipe takes now."""
        try:
            written = os.write(self._pipe, self._waiting)
        except BlockingIOError:
            return
        except OSError:  # the relay exited: nothing more reaches it
            self._lost()
            return
        del self._waiting[:written]
        if not self._waiting:
            self._unsent = 0

    def _lost(self) -> None:
        """The relay exited: what waits for it is dropped, and counted."""
        self._gone = True
        log.error("the span relay exited (status %s)", self.process.poll())
        self._waiting.clear()
        self.dropped += self._unsent
        self._unsent = 0

    def _export_here(self) -> None:
        """The turns waiting (whole frames: none was written yet), exported in this process."""
        from threadline.tracing.sink import ToExporters

        turns: list[RecordedTurn] = []
        at = 0
        while at < len(self._waiting):
            size = int.from_bytes(self._waiting[at:at + 4], "big")
            if size:
                turns += marshal.loads(self._waiting[at + 4:at + 4 + size])
            at += 4 + size
        self._waiting.clear()
        if turns:
            here = ToExporters.named(self.exporters)
            here.export(turns)
            here.shutdown()

    def _write_all(self, deadline: float) -> bool:
        while self._waiting and not self._gone:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            select.select([], [self._pipe], [], left)
            self._write()
        return not self._gone

    def _answers_now(self, timeout_s: float) -> bool:
        """Read what the relay has answered, waiting up to ``timeout_s`` for something;
        whether anything came."""
        if not select.select([self._answers], [], [], max(0.0, timeout_s))[0]:
            return False
        answers = os.read(self._answers, 64)
        if not answers:  # the relay exited
            self._lost()
            return False
        for answer in answers:
            if answer == READY[0]:
                self._ready = True
            else:
                self._asked -= 1
                self._answer = bytes([answer])
        return True

    def flush(self, timeout_ms: int = 30_000) -> bool:
        """Every turn given so far exported (or handed to its exporter and failed there);
        False if that did not happen in time, or the relay is gone."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._lock:
            while not self._ready and not self._gone and time.monotonic() < deadline:
                self._answers_now(deadline - time.monotonic())
            if self._gone or not self._ready:
                return False
            self._waiting += FLUSH
            self._asked += 1
            if not self._write_all(deadline):
                return False
            while self._asked > 0:
                left = deadline - time.monotonic()
                if left <= 0 or (not self._answers_now(left) and self._asked > 0):
                    return False
            return self._answer == b"1"

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Hand over what waits, let the relay export it and exit. A relay not yet ready (a
        short command) is stopped, and what waits is exported here instead: that is sooner
        than its start."""
        with self._lock:
            if self.process.stdin is None or self.process.stdin.closed:
                return
            if not self._ready and not self._gone and not self._inherited:
                self._answers_now(0)
            if not self._inherited and not self._ready and not self._gone:
                self.process.kill()
                self._export_here()
            elif not self._inherited:
                self._write_all(time.monotonic() + timeout_s)
            self.process.stdin.close()
            os.close(self._answers)
            if self._inherited:  # the parent's relay: the parent ends it
                return
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.error("the span relay did not finish exporting in %.0f s; stopped", timeout_s)
            self.process.kill()
            self.process.wait()


def _in_child(relay: weakref.ref[Relay]) -> None:
    found = relay()
    if found is not None:
        found._forked()


def _read(stream: BinaryIO, size: int) -> bytes | None:
    """Exactly ``size`` bytes, or None at the end of input."""
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def main(argv: Sequence[str]) -> int:
    """The relay process: ``python -m threadline.tracing.relay ANSWER_FD EXPORTER...``."""
    from threadline.tracing.sink import ToExporters

    # the parent's Ctrl-C reaches this process too; it ends when the parent's input does
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING)
    answers, names = int(argv[0]), argv[1:]
    sink = ToExporters.named(names)
    os.write(answers, READY)
    stream = sys.stdin.buffer
    while (header := _read(stream, 4)) is not None:
        size = int.from_bytes(header, "big")
        if size == 0:
            os.write(answers, b"1" if sink.flush(30_000) else b"0")
            continue
        frame = _read(stream, size)
        if frame is None:
            log.error("the span relay's input ended inside a turn; that turn is lost")
            break
        try:
            sink.export(marshal.loads(frame))  # a batch of turns
        except Exception:  # noqa: BLE001 - one bad turn never stops the others
            log.exception("the span relay could not export a turn")
    sink.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
