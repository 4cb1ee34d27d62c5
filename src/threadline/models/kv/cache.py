"""The KV cache of one model: find the best snapshot for a prompt, keep new ones.

``find`` looks in memory, then on disk (re-reading the folder if another process wrote to
it), for the snapshot sharing the longest token prefix with the prompt, and returns it only
if it beats what the context already holds. ``keep`` puts a snapshot in memory at once and
hands the disk write to a background thread, so a turn never waits for the disk; ``flush``
(called at exit) waits for pending writes.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadline.models.kv.snapshots import Identity, Snapshot, block_keys
from threadline.models.kv.tiers import DiskTier, MemoryTier

log = logging.getLogger("threadline.kv")


@dataclass(frozen=True)
class KVFound:
    snapshot: Snapshot
    tier: str        # "memory" or "disk"
    common: int      # tokens it shares with the prompt
    load_ms: float   # reading it (from disk: the file; from memory: nothing)


class KVCache:
    """Snapshots for ``identity``, ``memory_bytes`` in memory and ``disk_bytes`` under
    ``folder`` (None, or a budget of 0: no such tier)."""

    def __init__(self, identity: Identity, *, memory_bytes: int, folder: Path | None,
                 disk_bytes: int) -> None:
        self.identity = identity
        self.memory = MemoryTier(identity, memory_bytes) if memory_bytes > 0 else None
        self.disk = DiskTier(identity, folder, disk_bytes) \
            if folder is not None and disk_bytes > 0 else None
        self.counts = {"memory": 0, "disk": 0, "miss": 0, "kept": 0}
        self._writes: queue.Queue[Snapshot | None] = queue.Queue()
        self._writer: threading.Thread | None = None

    def find(self, tokens: Sequence[int], *, better_than: int = 0) -> KVFound | None:
        """The snapshot sharing the longest prefix with ``tokens``, if longer than
        ``better_than`` (what the context holds already)."""
        tokens = tuple(tokens)  # compared with snapshots' tuples: the same type, fast
        blocks = block_keys(self.identity, tokens)
        if not blocks:
            return None
        found = self._in_memory(tokens, blocks)
        if (found is None or found.common < len(tokens) - 1) and self.disk is not None:
            on_disk = self._on_disk(tokens, blocks, beyond=found.common if found else 0)
            found = on_disk or found
        if found is None or found.common <= better_than:
            self.counts["miss"] += 1
            return None
        self.counts[found.tier] += 1
        return found

    def keep(self, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` (the state of what was just evaluated)."""
        if snapshot.identity != self.identity:
            raise ValueError("a snapshot of another model")
        self.counts["kept"] += 1
        if self.memory is not None:
            self.memory.keep(snapshot)
        if self.disk is not None:
            self._start_writer()
            self._writes.put(snapshot)

    def flush(self) -> None:
        """Wait until every snapshot handed to ``keep`` is on disk (or given up on)."""
        if self._writer is not None:
            self._writes.join()

    def stats(self) -> dict[str, Any]:
        tiers: dict[str, Any] = {}
        if self.memory is not None:
            tiers["memory"] = {"snapshots": len(self.memory.index.entries),
                               "bytes": self.memory.index.bytes,
                               "budget_bytes": self.memory.budget}
        if self.disk is not None:
            count, size = self.disk.usage()
            tiers["disk"] = {"snapshots": count, "bytes": size, "budget_bytes": self.disk.budget,
                             "folder": str(self.disk.folder)}
        return {"identity": self.identity.key, "model": self.identity.model,
                "tiers": tiers, "found": dict(self.counts)}

    def clear(self) -> int:
        """Drop every snapshot of this model, in both tiers; how many there were."""
        self.flush()
        count = self.memory.clear() if self.memory is not None else 0
        if self.disk is not None:
            count += self.disk.clear()
        return count

    # -- internals -------------------------------------------------------------------------

    def _in_memory(self, tokens: Sequence[int], blocks: Sequence[str]) -> KVFound | None:
        if self.memory is None:
            return None
        best = self.memory.index.best(tokens, blocks)
        snapshot = None if best is None else self.memory.get(best[0].key)
        return None if best is None or snapshot is None else \
            KVFound(snapshot, "memory", best[1], 0.0)

    def _on_disk(self, tokens: Sequence[int], blocks: Sequence[str], *,
                 beyond: int) -> KVFound | None:
        assert self.disk is not None
        started = time.perf_counter()
        best = self.disk.best(tokens, blocks)
        if best is None or best[1] <= beyond:
            return None
        snapshot = self.disk.load(best[0].key)
        if snapshot is None:
            return None
        if self.memory is not None:
            self.memory.keep(snapshot)
        return KVFound(snapshot, "disk", best[1], (time.perf_counter() - started) * 1000)

    def _start_writer(self) -> None:
        if self._writer is None:
            assert self.disk is not None
            # the thread and the exit hook hold the tier and the queue, not the cache, so a
            # cache nobody uses is collected (with its snapshots) and its thread ends
            self._writer = threading.Thread(target=_write_loop, name="threadline-kv",
                                            args=(self.disk, self._writes), daemon=True)
            self._writer.start()
            weakref.finalize(self, self._writes.put, None)
            atexit.register(self._writes.join)  # a process exits with its snapshots written


def _write_loop(disk: DiskTier, writes: queue.Queue[Snapshot | None]) -> None:
    while True:
        snapshot = writes.get()
        try:
            if snapshot is None:
                return  # the cache is gone
            disk.keep(snapshot)
        except Exception:  # noqa: BLE001 - a cache write never fails anything
            log.exception("KV cache: a snapshot could not be written")
        finally:
            writes.task_done()
