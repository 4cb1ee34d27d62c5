"""Long-term memory entries, kept beside the log and partitioned by user.

Every read and write names the user in its key (``WHERE user_id = ? AND ...``): there is no
query that reads entries first and filters by user afterwards, so one user's question cannot
reach another user's memory. An entry records where it came from (the conversation and items,
and whether the user said it, confirmed it, the model inferred it, a tool returned it or it was
imported) and how far it is trusted (by default, only what the user stated or confirmed), when
threadline learned it, when it holds in the world, and when it must go. Revising an entry
invalidates it and records what replaced it; deleting, forgetting a user and the retention
purge delete rows for real.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from threadline.errors import InputError, NotFound
from threadline.items import format_time, new_id, utc_now
from threadline.stores.relational import RelationalStore, Session
from threadline.stores.rows import stored_time

MAX_TEXT_BYTES = 4096
COLUMNS = ("user_id", "id", "kind", "text", "source", "trusted", "conversation_id", "item_seqs",
           "recorded_at", "valid_from", "valid_to", "expires_at", "supersedes",
           "invalidated_at", "invalidated_by", "reason")
_COLUMNS_SQL = ", ".join(COLUMNS)
# the condition, on memory_entries aliased m, for an entry current at a moment (given twice)
CURRENT = ("m.invalidated_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > ?) "
           "AND (m.valid_to IS NULL OR m.valid_to > ?)")


class MemoryKind(StrEnum):
    FACT = "fact"            # semantic: something true about the user or their world
    EPISODE = "episode"      # a session's summary
    PROCEDURE = "procedure"  # how the user wants something done


class Source(StrEnum):
    USER_STATED = "user_stated"
    USER_CONFIRMED = "user_confirmed"
    MODEL_INFERRED = "model_inferred"
    TOOL_RETURNED = "tool_returned"
    IMPORTED = "imported"


TRUSTED_SOURCES = frozenset({Source.USER_STATED, Source.USER_CONFIRMED})


class UnknownMemory(NotFound):
    def __init__(self, user_id: str, entry_id: str) -> None:
        super().__init__(f"user {user_id!r} has no memory entry {entry_id!r}",
                         hint=f"list them with: threadline memory list --user {user_id}")


@dataclass(frozen=True)
class NewMemory:
    text: str
    kind: MemoryKind = MemoryKind.FACT
    source: Source = Source.USER_STATED
    conversation_id: str | None = None
    item_seqs: Sequence[int] = ()
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    expires_at: datetime | None = None
    # when the user said it (the message's time, for what the writer learns); default: now
    recorded_at: datetime | None = None


@dataclass(frozen=True)
class MemoryEntry:
    user_id: str
    id: str
    kind: MemoryKind
    text: str
    source: Source
    trusted: bool
    conversation_id: str | None
    item_seqs: tuple[int, ...]
    recorded_at: datetime
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    expires_at: datetime | None = None
    supersedes: str | None = None
    invalidated_at: datetime | None = None
    invalidated_by: str | None = None
    reason: str | None = None

    def current(self, at: datetime) -> bool:
        """Not revised or withdrawn, not expired, and holding in the world at ``at``."""
        return (self.invalidated_at is None
                and (self.expires_at is None or self.expires_at > at)
                and (self.valid_to is None or self.valid_to > at))

    def to_json(self) -> dict[str, Any]:
        moment = _moment
        return {"user_id": self.user_id, "id": self.id, "kind": str(self.kind),
                "text": self.text, "source": str(self.source), "trusted": self.trusted,
                "conversation_id": self.conversation_id, "item_seqs": list(self.item_seqs),
                "recorded_at": moment(self.recorded_at), "valid_from": moment(self.valid_from),
                "valid_to": moment(self.valid_to), "expires_at": moment(self.expires_at),
                "supersedes": self.supersedes, "invalidated_at": moment(self.invalidated_at),
                "invalidated_by": self.invalidated_by, "reason": self.reason}


class MemoryStore:
    """Memory entries in ``store``'s database."""

    def __init__(self, store: RelationalStore, *,
                 clock: Callable[[], datetime] = utc_now,
                 max_text_bytes: int = MAX_TEXT_BYTES) -> None:
        self.store, self.clock, self.max_text_bytes = store, clock, max_text_bytes

    def add(self, user_id: str, memory: NewMemory) -> MemoryEntry:
        """Record ``memory`` for the user. Trusted only if the user stated or confirmed it."""
        entry = self._entry(user_id, memory)
        with self.store.session(write=True) as db:
            self._insert(db, entry)
        return entry

    def add_many(self, user_id: str, memories: Sequence[NewMemory]) -> list[MemoryEntry]:
        """Record all of ``memories`` or none (an import): every one is checked before the
        single write session, and a failure inside it rolls the whole session back."""
        user_id_checked(user_id)  # a bad user id is not any one entry's fault
        entries = []
        for index, memory in enumerate(memories):
            try:
                entries.append(self._entry(user_id, memory))
            except InputError as err:
                raise InputError(f"entry {index}: {err.message}", hint=err.hint) from err
        with self.store.session(write=True) as db:
            for entry in entries:
                self._insert(db, entry)
        return entries

    def update(self, user_id: str, entry_id: str, memory: NewMemory,
               reason: str = "revised") -> MemoryEntry:
        """Replace a current entry: the old one is invalidated and kept as history."""
        new = replace(self._entry(user_id, memory), supersedes=entry_id)
        with self.store.session(write=True) as db:
            self._current(db, user_id, entry_id)
            self._insert(db, new)
            db.run("UPDATE memory_entries SET invalidated_at = ?, invalidated_by = ?, "
                   "reason = ? WHERE user_id = ? AND id = ?",
                   (format_time(new.recorded_at), new.id, reason, user_id, entry_id))
        return new

    def invalidate(self, user_id: str, entry_id: str, reason: str) -> MemoryEntry:
        """Withdraw a current entry (kept as history until deleted)."""
        with self.store.session(write=True) as db:
            self._current(db, user_id, entry_id)
            db.run("UPDATE memory_entries SET invalidated_at = ?, reason = ? "
                   "WHERE user_id = ? AND id = ?",
                   (format_time(self.clock()), reason, user_id, entry_id))
        return self.get(user_id, entry_id)

    def get(self, user_id: str, entry_id: str) -> MemoryEntry:
        with self.store.session() as db:
            row = db.one(f"SELECT {_COLUMNS_SQL} FROM memory_entries "
                         "WHERE user_id = ? AND id = ?",
                         (user_id_checked(user_id), entry_id))
        if row is None:
            raise UnknownMemory(user_id, entry_id)
        return entry_from_row(row)

    def entries(self, user_id: str, *, at: datetime | None = None,
                history: bool = False) -> list[MemoryEntry]:
        """The user's current entries at ``at`` (default: now), oldest first; with
        ``history`` also the revised, withdrawn, expired and past ones."""
        with self.store.session() as db:
            rows = db.all(f"SELECT {_COLUMNS_SQL} FROM memory_entries WHERE user_id = ? "
                          "ORDER BY recorded_at, id", (user_id_checked(user_id),))
        found = [entry_from_row(row) for row in rows]
        moment = at or self.clock()
        return found if history else [e for e in found if e.current(moment)]

    def delete(self, user_id: str, entry_id: str) -> None:
        """Delete an entry for real, with the entries it replaced."""
        with self.store.session(write=True) as db:
            if db.one("SELECT 1 FROM memory_entries WHERE user_id = ? AND id = ?",
                      (user_id_checked(user_id), entry_id)) is None:
                raise UnknownMemory(user_id, entry_id)
            chain, current = [entry_id], entry_id
            while (row := db.one("SELECT supersedes FROM memory_entries WHERE user_id = ? "
                                 "AND id = ?", (user_id, current))) and row[0]:
                chain.append(current := row[0])
            for each in chain:
                db.run("DELETE FROM memory_entries WHERE user_id = ? AND id = ?",
                       (user_id, each))

    def forget(self, user_id: str) -> int:
        """Delete everything remembered about the user (their entries, with their vectors,
        and the writer's jobs for them: a pending one would learn it all again, a done one
        keeps what it decided); how many entries went."""
        with self.store.session(write=True) as db:
            db.run("DELETE FROM memory_jobs WHERE user_id = ?", (user_id_checked(user_id),))
            return db.run("DELETE FROM memory_entries WHERE user_id = ?", (user_id,))

    def purge_expired(self, now: datetime | None = None) -> int:
        """The retention job: delete (not hide) every entry past its expiry."""
        with self.store.session(write=True) as db:
            return db.run("DELETE FROM memory_entries WHERE expires_at IS NOT NULL AND "
                          "expires_at <= ?", (format_time(now or self.clock()),))

    # -- internals -----------------------------------------------------------------------

    def _entry(self, user_id: str, memory: NewMemory) -> MemoryEntry:
        text = memory.text.strip()
        if not text:
            raise InputError("a memory entry needs text; nothing was saved")
        size = len(text.encode("utf-8"))
        if size > self.max_text_bytes:
            raise InputError(f"a memory entry is {size:,} bytes, over the limit of "
                             f"{self.max_text_bytes:,}; nothing was saved",
                             hint="keep one fact per entry")
        try:
            kind, source = MemoryKind(memory.kind), Source(memory.source)
        except ValueError as err:
            raise InputError(f"{err}; kinds: {', '.join(MemoryKind)}; sources: "
                             f"{', '.join(Source)}") from err
        if memory.valid_from and memory.valid_to and memory.valid_to <= memory.valid_from:
            raise InputError("a memory entry's validity ends before it starts")
        return MemoryEntry(user_id_checked(user_id), new_id("mem_"), kind, text, source,
                           source in TRUSTED_SOURCES, memory.conversation_id,
                           tuple(memory.item_seqs), memory.recorded_at or self.clock(),
                           memory.valid_from, memory.valid_to, memory.expires_at)

    def _insert(self, db: Session, entry: MemoryEntry) -> None:
        moment = _moment
        try:
            db.run(f"INSERT INTO memory_entries ({_COLUMNS_SQL}) VALUES "
                   "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (entry.user_id, entry.id, str(entry.kind), entry.text, str(entry.source),
                    entry.trusted, entry.conversation_id, json.dumps(list(entry.item_seqs)),
                    moment(entry.recorded_at), moment(entry.valid_from),
                    moment(entry.valid_to), moment(entry.expires_at), entry.supersedes, None,
                    None, None))
        except self.store.INTEGRITY_ERRORS as err:
            raise InputError(f"conversation {entry.conversation_id!r} does not exist; "
                             "nothing was saved") from err

    def _current(self, db: Session, user_id: str, entry_id: str) -> None:
        row = db.one("SELECT invalidated_at FROM memory_entries WHERE user_id = ? AND id = ?",
                     (user_id_checked(user_id), entry_id))
        if row is None:
            raise UnknownMemory(user_id, entry_id)
        if row[0] is not None:
            raise InputError(f"memory entry {entry_id} was already revised or withdrawn",
                             hint="change the entry that replaced it")


def _moment(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


def user_id_checked(user_id: str) -> str:
    if not user_id or user_id != user_id.strip() or len(user_id) > 200:
        raise InputError(f"invalid user id {user_id!r}: use 1-200 characters, no surrounding "
                         "spaces")
    return user_id


def entry_from_row(row: Sequence[Any]) -> MemoryEntry:
    def moment(value: Any) -> datetime | None:
        return None if value is None else stored_time(value)
    recorded = moment(row[8])
    assert recorded is not None
    return MemoryEntry(row[0], row[1], MemoryKind(row[2]), row[3], Source(row[4]),
                       bool(row[5]), row[6], tuple(json.loads(row[7])), recorded,
                       moment(row[9]), moment(row[10]), moment(row[11]), row[12],
                       moment(row[13]), row[14], row[15])
