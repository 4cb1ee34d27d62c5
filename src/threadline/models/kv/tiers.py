"""The two tiers snapshots are kept in, each under a byte budget, each indexed by block key.

Memory is an LRU in the process. Disk is a directory per identity (``<dir>/<identity>/``),
shared by every process that runs the same model: each snapshot is one file, written to a
temporary name and renamed into place, so a reader sees a whole file or none, and two writers
of the same key simply leave one of two identical files. Least recently used files go first
when the directory is over its budget. Nothing here raises into a turn: a full disk, a
read-only directory or a damaged file is logged and skipped (a damaged file is removed).

A snapshot whose tokens another one extends is redundant (restoring the longer one and
truncating it gives the same state), so keeping a snapshot drops those it extends: a
conversation keeps one, and it grows turn by turn.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from threadline.models.kv.snapshots import (
    DamagedSnapshot,
    Header,
    Identity,
    Snapshot,
    block_keys,
    from_bytes,
    read_header,
)
from threadline.sequences import common_prefix_len

log = logging.getLogger("threadline.kv")
_SUFFIX = ".kv"
_HEADER_READ = 1 << 16


@dataclass
class Entry:
    key: str
    tokens: tuple[int, ...]
    size: int


class Index:
    """Which kept snapshots pass through which block keys."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity
        self.entries: dict[str, Entry] = {}
        self._by_block: dict[str, set[str]] = {}

    def add(self, entry: Entry) -> None:
        self.entries[entry.key] = entry
        for block in block_keys(self.identity, entry.tokens):
            self._by_block.setdefault(block, set()).add(entry.key)

    def remove(self, key: str) -> Entry | None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            for block in block_keys(self.identity, entry.tokens):
                keys = self._by_block.get(block)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._by_block[block]
        return entry

    def best(self, tokens: Sequence[int], blocks: Sequence[str]) -> tuple[Entry, int] | None:
        """The entry sharing the longest prefix with ``tokens`` (whose block keys are
        ``blocks``), and how long that prefix is."""
        for depth in range(len(blocks) - 1, -1, -1):
            keys = self._by_block.get(blocks[depth])
            if keys:
                found = [(self.entries[k], common_prefix_len(self.entries[k].tokens, tokens))
                         for k in keys]
                return max(found, key=lambda pair: pair[1])
        return None

    def extended_by(self, tokens: Sequence[int]) -> list[str]:
        """Keys of entries whose tokens are a proper prefix of ``tokens``."""
        out = set()
        for block in block_keys(self.identity, tokens):
            for key in self._by_block.get(block, ()):
                entry = self.entries[key]
                if len(entry.tokens) < len(tokens) and \
                        tuple(tokens[:len(entry.tokens)]) == entry.tokens:
                    out.add(key)
        return sorted(out)

    @property
    def bytes(self) -> int:
        return sum(e.size for e in self.entries.values())


class MemoryTier:
    def __init__(self, identity: Identity, budget: int) -> None:
        self.budget = budget
        self.index = Index(identity)
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()

    def get(self, key: str) -> Snapshot | None:
        snapshot = self._snapshots.get(key)
        if snapshot is not None:
            self._snapshots.move_to_end(key)
        return snapshot

    def keep(self, snapshot: Snapshot) -> None:
        if snapshot.size > self.budget:
            return
        for key in self.index.extended_by(snapshot.tokens):
            self._drop(key)
        self._drop(snapshot.key)
        self._snapshots[snapshot.key] = snapshot
        self.index.add(Entry(snapshot.key, snapshot.tokens, snapshot.size))
        while self.index.bytes > self.budget:
            self._drop(next(iter(self._snapshots)))

    def clear(self) -> int:
        count = len(self._snapshots)
        for key in list(self._snapshots):
            self._drop(key)
        return count

    def _drop(self, key: str) -> None:
        self._snapshots.pop(key, None)
        self.index.remove(key)


class DiskTier:
    def __init__(self, identity: Identity, root: Path, budget: int) -> None:
        self.budget = budget
        self.root = root
        self.folder = root / identity.key
        self.index = Index(identity)
        self._identity = identity
        self._seen: float | None = None  # the folder's mtime when last read
        self._warned: set[str] = set()
        # the index, between the background writer and a turn looking for a snapshot; files
        # are read and written outside it, so a lookup never waits for a write
        self.lock = threading.Lock()

    def best(self, tokens: Sequence[int], blocks: Sequence[str]) -> tuple[Entry, int] | None:
        with self.lock:
            self.refresh()
            return self.index.best(tokens, blocks)

    def refresh(self) -> None:
        """Read the headers of files written since the folder was last read (by any
        process), and forget files that are gone."""
        try:
            mtime = self.folder.stat().st_mtime
        except FileNotFoundError:
            return
        except OSError as err:
            self._warn("read", err)
            return
        if self._seen == mtime:
            return
        self._seen = mtime
        present = {path.stem: path for path in self._files()}
        for key in set(self.index.entries) - set(present):
            self.index.remove(key)
        for key, path in present.items():
            if key not in self.index.entries:
                header = self._header(path)
                if header is not None:
                    self.index.add(Entry(key, header.tokens, path.stat().st_size))

    def load(self, key: str) -> Snapshot | None:
        path = self.folder / (key + _SUFFIX)
        problem: Exception | None = None
        snapshot = None
        try:
            snapshot = from_bytes(path.read_bytes())
            os.utime(path)  # recently used: evicted last
        except FileNotFoundError:
            pass  # another process evicted it
        except (OSError, DamagedSnapshot) as err:
            problem = err
        if snapshot is not None and (snapshot.identity != self._identity
                                     or snapshot.key != key):
            snapshot, problem = None, DamagedSnapshot("it belongs to another model or prefix")
        if problem is not None:
            self._discard(path, problem)
        if snapshot is None:
            with self.lock:
                self.index.remove(key)
        return snapshot

    def keep(self, snapshot: Snapshot) -> None:
        if snapshot.size > self.budget:
            return
        path = self.folder / (snapshot.key + _SUFFIX)
        temporary = self.folder / f".{snapshot.key}.{os.getpid()}.{id(snapshot)}.tmp"
        data = snapshot.to_bytes()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            temporary.write_bytes(data)
            os.replace(temporary, path)
        except OSError as err:
            temporary.unlink(missing_ok=True)
            self._warn("write", err)
            return
        with self.lock:
            self.index.add(Entry(snapshot.key, snapshot.tokens, len(data)))
            self.refresh()  # what other processes wrote counts against the budget too
            for key in self.index.extended_by(snapshot.tokens):
                self._delete(key)
            self._evict()

    def clear(self) -> int:
        with self.lock:
            self.refresh()
            keys = list(self.index.entries)
            for key in keys:
                self._delete(key)
        return len(keys)

    def usage(self) -> tuple[int, int]:
        """How many snapshots, and how many bytes, the folder holds now."""
        with self.lock:
            self.refresh()
            return len(self.index.entries), self.index.bytes

    def _evict(self) -> None:
        by_age = sorted(self._files(), key=_mtime)
        while self.index.bytes > self.budget and by_age:
            self._delete(by_age.pop(0).stem)

    def _files(self) -> Iterator[Path]:
        try:
            yield from _snapshot_files(self.folder)
        except FileNotFoundError:
            return
        except OSError as err:
            self._warn("read", err)

    def _header(self, path: Path) -> Header | None:
        try:
            with path.open("rb") as handle:
                data = handle.read(_HEADER_READ)
                try:
                    header = read_header(data)
                except DamagedSnapshot:
                    data += handle.read()  # a long header: read the rest
                    header = read_header(data)
        except OSError as err:
            self._warn("read", err)
            return None
        except DamagedSnapshot as err:
            self._discard(path, err)
            return None
        if header.identity != self._identity:
            return None
        return header

    def _delete(self, key: str) -> None:
        self.index.remove(key)
        try:
            (self.folder / (key + _SUFFIX)).unlink(missing_ok=True)
        except OSError as err:
            self._warn("delete", err)

    def _discard(self, path: Path, err: Exception) -> None:
        """Remove a file that cannot be used (the index is the caller's to mend)."""
        log.warning("KV snapshot %s is not used: %s", path, err)
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)

    def _warn(self, action: str, err: OSError) -> None:
        if action not in self._warned:  # once per kind: a read-only disk would flood the log
            self._warned.add(action)
            log.warning("KV cache: cannot %s under %s (%s); turns go on without it", action,
                        self.folder, err)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@dataclass(frozen=True)
class FolderUsage:
    """What one model's folder of snapshots holds (for ``threadline cache stats``)."""

    identity: str
    model: str | None  # from a snapshot's header; None when the folder holds none
    snapshots: int
    bytes: int

    def to_json(self) -> dict[str, object]:
        return {"identity": self.identity, "model": self.model, "snapshots": self.snapshots,
                "bytes": self.bytes}


def usage(root: Path) -> list[FolderUsage]:
    """Every model's snapshots under ``root``, without loading any model."""
    out = []
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    for folder in folders:
        files = list(_snapshot_files(folder))
        model = None
        for path in files:
            try:
                with path.open("rb") as handle:
                    model = read_header(handle.read(_HEADER_READ)).identity.model
                break
            except (OSError, DamagedSnapshot):
                continue
        out.append(FolderUsage(folder.name, model, len(files),
                               sum(_size(p) for p in files)))
    return out


def clear(root: Path) -> int:
    """Delete every snapshot under ``root`` (every model's); how many there were."""
    count = 0
    for folder in (p for p in root.iterdir() if p.is_dir()) if root.is_dir() else ():
        for path in folder.iterdir():
            if path.suffix in (_SUFFIX, ".tmp"):
                path.unlink(missing_ok=True)
                count += path.suffix == _SUFFIX
    return count


def _snapshot_files(folder: Path) -> Iterator[Path]:
    """The snapshot files in ``folder`` (not the temporary ones being written)."""
    return (p for p in folder.iterdir() if p.suffix == _SUFFIX and not p.name.startswith("."))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
