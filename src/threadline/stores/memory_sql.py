"""Memory over SQL, shared by the SQLite and PostgreSQL stores.

The :class:`~threadline.stores.memory.MemoryBackend` written once, in the SQL both databases
understand, like the log in ``stores/relational.py``; only the full-text search statement and
its query syntax come from the backend (``stores/fulltext.py``). Every statement on entries
names the user in its key (``WHERE user_id = ? AND ...``): none reads entries first and
filters by user afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from threadline.errors import InputError
from threadline.items import format_time
from threadline.stores.fulltext import FullText
from threadline.stores.memory import (
    ENTRY_COLUMNS,
    JobClaim,
    MemoryEntry,
    MemoryHit,
    MemoryJob,
    UnknownMemory,
    entry_from_row,
    moment_text,
)
from threadline.stores.sessions import Database, Session

ENTRY_SQL = ", ".join(ENTRY_COLUMNS)
# the entry columns on memory_entries aliased m, for statements that join
ENTRY_SQL_M = ", ".join("m." + c for c in ENTRY_COLUMNS)
# the condition, on memory_entries aliased m, for an entry current at a moment (given twice)
CURRENT = ("m.invalidated_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > ?) "
           "AND (m.valid_to IS NULL OR m.valid_to > ?)")


class SQLMemory:
    """Memory entries, vectors and jobs in the tables of migrations ``*_memory*``."""

    def __init__(self, db: Database, fulltext: FullText) -> None:
        self._db, self._fulltext = db, fulltext

    # -- entries -------------------------------------------------------------------------

    def insert(self, entries: Sequence[MemoryEntry]) -> None:
        with self._db.transaction() as db:
            for entry in entries:
                self._insert(db, entry)

    def revise(self, entry_id: str, replacement: MemoryEntry, reason: str) -> None:
        user_id = replacement.user_id
        with self._db.transaction() as db:
            _current(db, user_id, entry_id)
            self._insert(db, replacement)
            db.run("UPDATE memory_entries SET invalidated_at = ?, invalidated_by = ?, "
                   "reason = ? WHERE user_id = ? AND id = ?",
                   (format_time(replacement.recorded_at), replacement.id, reason, user_id,
                    entry_id))

    def invalidate(self, user_id: str, entry_id: str, at: datetime,
                   reason: str) -> MemoryEntry:
        with self._db.transaction() as db:
            _current(db, user_id, entry_id)
            db.run("UPDATE memory_entries SET invalidated_at = ?, reason = ? "
                   "WHERE user_id = ? AND id = ?", (format_time(at), reason, user_id, entry_id))
            return _get(db, user_id, entry_id)

    def get(self, user_id: str, entry_id: str) -> MemoryEntry:
        with self._db.reading() as db:
            return _get(db, user_id, entry_id)

    def entries(self, user_id: str) -> list[MemoryEntry]:
        with self._db.reading() as db:
            rows = db.all(f"SELECT {ENTRY_SQL} FROM memory_entries WHERE user_id = ? "
                          "ORDER BY recorded_at, id", (user_id,))
        return [entry_from_row(row) for row in rows]

    def delete(self, user_id: str, entry_id: str) -> None:
        with self._db.transaction() as db:
            if db.one("SELECT 1 FROM memory_entries WHERE user_id = ? AND id = ?",
                      (user_id, entry_id)) is None:
                raise UnknownMemory(user_id, entry_id)
            chain, current = [entry_id], entry_id
            while (row := db.one("SELECT supersedes FROM memory_entries WHERE user_id = ? "
                                 "AND id = ?", (user_id, current))) and row[0]:
                chain.append(current := row[0])
            for each in chain:  # their vectors go with them (a foreign key)
                db.run("DELETE FROM memory_entries WHERE user_id = ? AND id = ?",
                       (user_id, each))

    def forget(self, user_id: str) -> int:
        with self._db.transaction() as db:
            db.run("DELETE FROM memory_jobs WHERE user_id = ?", (user_id,))
            return db.run("DELETE FROM memory_entries WHERE user_id = ?", (user_id,))

    def purge_expired(self, now: datetime) -> int:
        with self._db.transaction() as db:
            return db.run("DELETE FROM memory_entries WHERE expires_at IS NOT NULL AND "
                          "expires_at <= ?", (format_time(now),))

    def _insert(self, db: Session, entry: MemoryEntry) -> None:
        moment = moment_text
        try:
            db.run(f"INSERT INTO memory_entries ({ENTRY_SQL}) VALUES "
                   "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (entry.user_id, entry.id, str(entry.kind), entry.text, str(entry.source),
                    entry.trusted, entry.conversation_id, json.dumps(list(entry.item_seqs)),
                    moment(entry.recorded_at), moment(entry.valid_from),
                    moment(entry.valid_to), moment(entry.expires_at), entry.supersedes, None,
                    None, None))
        except self._db.integrity_errors as err:
            raise InputError(f"conversation {entry.conversation_id!r} does not exist; "
                             "nothing was saved") from err

    # -- recall --------------------------------------------------------------------------

    def search(self, user_id: str, terms: Sequence[str], *, at: datetime,
               limit: int) -> list[MemoryHit]:
        moment = format_time(at)
        with self._db.reading() as db:
            rows = db.all(self._fulltext.memory_search,
                          (self._fulltext.query([[t] for t in terms]), user_id, moment, moment,
                           limit))
        return [MemoryHit(row) for row in rows]

    def hits(self, user_id: str, ids: Sequence[str]) -> list[MemoryHit]:
        if not ids:
            return []
        with self._db.reading() as db:
            found = {row[1]: row for row in db.all(
                f"SELECT {ENTRY_SQL} FROM memory_entries WHERE user_id = ? AND id IN "
                f"({', '.join('?' * len(ids))})", (user_id, *ids))}
        return [MemoryHit(found[i]) for i in ids if i in found]

    # -- embeddings ----------------------------------------------------------------------

    def unembedded(self, user_id: str) -> list[tuple[str, str]]:
        with self._db.reading() as db:
            rows = db.all("SELECT m.id, m.text FROM memory_entries m LEFT JOIN memory_vectors v"
                          " ON v.user_id = m.user_id AND v.id = m.id"
                          " WHERE m.user_id = ? AND v.id IS NULL", (user_id,))
        return [(row[0], row[1]) for row in rows]

    def save_vectors(self, user_id: str, model: str,
                     vectors: Sequence[tuple[str, bytes]]) -> None:
        with self._db.transaction() as db:
            for entry_id, vector in vectors:
                # an entry deleted meanwhile has no row to point at: nothing to embed
                db.run("INSERT INTO memory_vectors (user_id, id, model, vector) SELECT"
                       " user_id, id, ?, ? FROM memory_entries WHERE user_id = ? AND id = ?"
                       " ON CONFLICT (user_id, id) DO NOTHING",
                       (model, vector, user_id, entry_id))

    def turns_said(self, user_id: str, around: Sequence[tuple[str, datetime, datetime]], *,
                   at: datetime) -> list[MemoryEntry]:
        if not around:
            return []
        moment = format_time(at)
        windows = " OR ".join("(m.conversation_id = ? AND m.recorded_at >= ? AND "
                              "m.recorded_at < ?)" for _ in around)
        params = [value for cid, start, end in around
                  for value in (cid, format_time(start), format_time(end))]
        with self._db.reading() as db:
            rows = db.all(f"SELECT {ENTRY_SQL_M} FROM memory_entries m WHERE m.user_id = ? "
                          f"AND m.kind = 'turn' AND ({windows}) AND {CURRENT} "
                          "ORDER BY m.recorded_at, m.id", (user_id, *params, moment, moment))
        return [entry_from_row(row) for row in rows]

    def vectors(self, user_id: str, at: datetime) -> list[tuple[str, bytes]]:
        moment = format_time(at)
        with self._db.reading() as db:
            rows = db.all("SELECT m.id, v.vector FROM memory_vectors v JOIN memory_entries m"
                          " ON m.user_id = v.user_id AND m.id = v.id"
                          f" WHERE v.user_id = ? AND {CURRENT}", (user_id, moment, moment))
        return [(row[0], bytes(row[1])) for row in rows]

    # -- the writer's queue --------------------------------------------------------------

    def enqueue(self, conversation_id: str, seq: int, user_id: str) -> None:
        with self._db.transaction() as db:
            db.run("INSERT INTO memory_jobs (conversation_id, seq, user_id) VALUES (?, ?, ?) "
                   "ON CONFLICT (conversation_id, seq) DO NOTHING",
                   (conversation_id, seq, user_id))

    def claim(self, now: float, until: float, limit: int) -> list[JobClaim]:
        with self._db.transaction() as db:
            rows = db.all("SELECT conversation_id, seq, user_id FROM memory_jobs WHERE "
                          "status = 'pending' AND (claimed_until IS NULL OR claimed_until < ?)"
                          " ORDER BY conversation_id, seq LIMIT ?", (now, limit))
            claimed = []
            for conversation_id, seq, user_id in rows:
                # taken only if still free: another worker may have claimed it meanwhile
                if db.run("UPDATE memory_jobs SET claimed_until = ?, attempts = attempts + 1 "
                          "WHERE conversation_id = ? AND seq = ? AND status = 'pending' AND "
                          "(claimed_until IS NULL OR claimed_until < ?)",
                          (until, conversation_id, seq, now)):
                    claimed.append(JobClaim(conversation_id, int(seq), user_id))
        return claimed

    def finish(self, conversation_id: str, seq: int,
               decisions: Sequence[Mapping[str, Any]]) -> None:
        with self._db.transaction() as db:
            db.run("UPDATE memory_jobs SET status = 'done', claimed_until = NULL, error = NULL, "
                   "decisions = ? WHERE conversation_id = ? AND seq = ?",
                   (json.dumps(list(decisions), ensure_ascii=False), conversation_id, seq))

    def fail(self, conversation_id: str, seq: int, error: str, max_attempts: int) -> None:
        with self._db.transaction() as db:
            db.run("UPDATE memory_jobs SET error = ?, claimed_until = NULL, status = "
                   "CASE WHEN attempts >= ? THEN 'failed' ELSE 'pending' END "
                   "WHERE conversation_id = ? AND seq = ?",
                   (error, max_attempts, conversation_id, seq))

    def jobs(self, status: str | None = None) -> list[MemoryJob]:
        sql = ("SELECT conversation_id, seq, user_id, status, attempts, decisions, error "
               "FROM memory_jobs")
        with self._db.reading() as db:
            rows = db.all(sql + (" WHERE status = ?" if status else "")
                          + " ORDER BY conversation_id, seq", (status,) if status else ())
        return [MemoryJob(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]) if r[5] else None,
                          r[6]) for r in rows]


def _get(db: Session, user_id: str, entry_id: str) -> MemoryEntry:
    row = db.one(f"SELECT {ENTRY_SQL} FROM memory_entries WHERE user_id = ? AND id = ?",
                 (user_id, entry_id))
    if row is None:
        raise UnknownMemory(user_id, entry_id)
    return entry_from_row(row)


def _current(db: Session, user_id: str, entry_id: str) -> None:
    row = db.one("SELECT invalidated_at FROM memory_entries WHERE user_id = ? AND id = ?",
                 (user_id, entry_id))
    if row is None:
        raise UnknownMemory(user_id, entry_id)
    if row[0] is not None:
        raise InputError(f"memory entry {entry_id} was already revised or withdrawn",
                         hint="change the entry that replaced it")
