"""The embedded default store: one SQLite file in WAL mode.

One connection writes, serialised by a lock (and across processes by ``flock`` on
``<file>-writer``); every commit is one ``BEGIN IMMEDIATE``
transaction, so concurrent writers (threads or processes) queue on SQLite's write lock and the
version check inside the transaction sees the latest head. Concurrent commits of one process
share a transaction and its fsync, each in its own savepoint (``group.py``). Reads go through
a pool of read connections, so they never wait behind a commit's fsync (WAL readers see the
last commit and block no writer); a read inside a thread's own transaction uses its
connection, so it sees what the transaction wrote. The log itself is
:class:`~threadline.stores.relational.RelationalStore`; memory and corpora search with FTS5
(``fulltext.py``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

try:
    import fcntl
except ImportError:  # not POSIX: SQLite's own lock alone serialises writers
    fcntl = None  # type: ignore[assignment]

from threadline.errors import StoreError, StoreReadOnly
from threadline.settings import Durability
from threadline.stores.relational import Execute, RelationalStore, Violation
from threadline.stores.sessions import Session
from threadline.stores.sqlite.fulltext import FTS5, create_corpus_index
from threadline.stores.sqlite.group import GroupCommit
from threadline.stores.sqlite.schema import check_file, current_version, migrate

_SYNCHRONOUS = {Durability.FULL: "FULL", Durability.NORMAL: "NORMAL", Durability.OFF: "OFF"}
TRANSCRIPTS = 11  # the migration that gave items their transcript hashes
_T = TypeVar("_T")


class SQLiteStore(RelationalStore):
    """A :class:`~threadline.stores.base.Store` over one SQLite file."""

    CALL_ORDER = "rowid"
    UTC_DAY = "substr({}, 1, 10)"  # times are stored as ``format_time`` writes them, in UTC
    LOCK_CONVERSATION = None  # BEGIN IMMEDIATE already holds the whole database
    INTEGRITY_ERRORS = (sqlite3.IntegrityError,)
    FULL_TEXT = FTS5
    READS_IN_PLACE = True  # WAL readers on their own connections: no commit holds them up

    def __init__(self, path: str | os.PathLike[str], *,
                 durability: Durability = Durability.FULL, busy_timeout_s: float = 30.0) -> None:
        super().__init__()
        file = Path(path)
        self.path = str(file)
        self.durability = durability
        self._lock = threading.RLock()
        self._writing = threading.local()   # .depth: this thread's open transactions
        self._idle_readers: list[sqlite3.Connection] = []
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._busy_timeout_s = busy_timeout_s
        self._group = GroupCommit(self._begin, lambda: self._conn.in_transaction,
                                  self._committed)
        check_file(file)
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreReadOnly(str(file.parent), err.strerror or str(err)) from err
        self._conn, version = self._open(file, busy_timeout_s)
        self._writer_fd = _writer_lock_file(file)
        if version >= TRANSCRIPTS:  # rows from before it get their transcript hashes (if a
            try:                    # crash cut the first fill short, on a later open)
                self.fill_transcripts()
            except BaseException:
                self.close()
                raise

    def _open(self, file: Path, busy_timeout_s: float) -> tuple[sqlite3.Connection, int]:
        """The connection, and the schema version it is at."""
        conn = sqlite3.connect(file, isolation_level=None, check_same_thread=False,
                               timeout=busy_timeout_s)
        try:
            current_version(conn, file)  # refuses foreign and newer files before any write
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode != "wal":
                raise StoreReadOnly(self.path, f"could not switch to WAL mode (got {mode})")
            conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[self.durability]}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA cache_size = -32768")  # 32 MiB: index pages of long logs stay hot
            migrate(conn, file)
            version = current_version(conn, file)
        except sqlite3.OperationalError as err:
            conn.close()
            raise _store_error(self.path, err) from err
        except BaseException:
            conn.close()
            raise
        return conn, version

    def close(self) -> None:
        with self._lock, self._readers_lock:
            for reader in self._readers:
                reader.close()
            self._conn.close()
            if self._writer_fd is not None:
                os.close(self._writer_fd)
                self._writer_fd = None

    def _reader(self) -> sqlite3.Connection:
        try:
            return self._idle_readers.pop()
        except IndexError:
            pass
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=self._busy_timeout_s)
            conn.execute("PRAGMA query_only = ON")  # the write path is the other connection
            conn.execute("PRAGMA cache_size = -16384")
        except sqlite3.OperationalError as err:
            raise _store_error(self.path, err) from err
        with self._readers_lock:  # not the write lock: a commit may hold that
            self._readers.append(conn)
        return conn

    def _prepare_corpora(self) -> None:
        with self._transaction() as db:
            create_corpus_index(db)

    # -- connections ---------------------------------------------------------------------

    def _write(self, work: Callable[[Session], _T]) -> _T:
        if getattr(self._writing, "depth", 0):  # inside this thread's own transaction: it
            return super()._write(work)         # cannot wait for a group it is leading
        return self._group.run(work)

    @contextmanager
    def _begin(self) -> Iterator[Execute]:
        with self._lock, self._writer_lock():
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as err:
                raise _store_error(self.path, err) from err
            self._writing.depth = getattr(self._writing, "depth", 0) + 1
            try:
                yield self._execute
                self._execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            finally:
                self._writing.depth -= 1

    @contextmanager
    def _writer_lock(self) -> Iterator[None]:
        """Hold the file's writer lock across processes (``flock`` on ``<file>-writer``):
        a process waiting for it wakes the moment the holder commits, where waiting on
        SQLite's own lock polls, sleeping up to 100 ms between tries. Where the lock file
        cannot be opened (a read-only directory), SQLite's lock alone serialises writers."""
        if self._writer_fd is None:
            yield
            return
        fcntl.flock(self._writer_fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._writer_fd, fcntl.LOCK_UN)

    @contextmanager
    def _connect(self) -> Iterator[Execute]:
        if getattr(self._writing, "depth", 0):  # inside this thread's transaction: its view
            with self._lock:
                yield self._execute
            return
        reader = self._reader()
        try:
            yield partial(self._execute_on, reader)
        finally:
            self._idle_readers.append(reader)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._execute_on(self._conn, sql, params)

    def _execute_on(self, conn: sqlite3.Connection, sql: str,
                    params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return conn.execute(sql, params)
        except sqlite3.OperationalError as err:
            raise _store_error(self.path, err) from err

    def _violation(self, err: Exception) -> Violation:
        text = str(err)
        if "client_msg_id" in text:
            return "client_msg_id"
        return "foreign_key" if "FOREIGN KEY" in text else "other"


def _store_error(path: str, err: sqlite3.OperationalError) -> Exception:
    text = str(err)
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return StoreReadOnly(path, text)
    if "locked" in text or "busy" in text:
        return StoreError(f"{path} stayed locked by another writer ({text})",
                          hint="retry; if it persists, look for a stuck threadline process")
    return StoreError(f"{path}: {text}")


def _writer_lock_file(file: Path) -> int | None:
    """The open lock file beside ``file`` that writers take in turn, or None where it cannot
    be made."""
    if fcntl is None:
        return None
    try:
        return os.open(f"{file}-writer", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
