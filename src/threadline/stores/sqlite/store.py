"""The embedded default store: one SQLite file in WAL mode.

One connection per store, serialised by a lock; every commit is one ``BEGIN IMMEDIATE``
transaction, so concurrent writers (threads or processes) queue on SQLite's write lock and the
version check inside the transaction sees the latest head. The log itself is
:class:`~threadline.stores.relational.RelationalStore`; memory and corpora search with FTS5
(``fulltext.py``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from threadline.errors import StoreError, StoreReadOnly
from threadline.settings import Durability
from threadline.stores.relational import Execute, RelationalStore, Violation
from threadline.stores.sqlite.fulltext import FTS5, create_corpus_index
from threadline.stores.sqlite.schema import check_file, current_version, migrate

_SYNCHRONOUS = {Durability.FULL: "FULL", Durability.NORMAL: "NORMAL", Durability.OFF: "OFF"}
TRANSCRIPTS = 11  # the migration that gave items their transcript hashes


class SQLiteStore(RelationalStore):
    """A :class:`~threadline.stores.base.Store` over one SQLite file."""

    CALL_ORDER = "rowid"
    LOCK_CONVERSATION = None  # BEGIN IMMEDIATE already holds the whole database
    INTEGRITY_ERRORS = (sqlite3.IntegrityError,)
    FULL_TEXT = FTS5

    def __init__(self, path: str | os.PathLike[str], *,
                 durability: Durability = Durability.FULL, busy_timeout_s: float = 30.0) -> None:
        super().__init__()
        file = Path(path)
        self.path = str(file)
        self.durability = durability
        self._lock = threading.RLock()
        check_file(file)
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreReadOnly(str(file.parent), err.strerror or str(err)) from err
        self._conn, version = self._open(file, busy_timeout_s)
        if version >= TRANSCRIPTS:  # rows from before it get their transcript hashes (if a
            try:                    # crash cut the first fill short, on a later open)
                self.fill_transcripts()
            except BaseException:
                self._conn.close()
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
        with self._lock:
            self._conn.close()

    def _prepare_corpora(self) -> None:
        with self._transaction() as db:
            create_corpus_index(db)

    # -- connections ---------------------------------------------------------------------

    @contextmanager
    def _begin(self) -> Iterator[Execute]:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as err:
                raise _store_error(self.path, err) from err
            try:
                yield self._execute
                self._execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _connect(self) -> Iterator[Execute]:
        with self._lock:
            yield self._execute

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
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
