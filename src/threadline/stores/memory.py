"""The MemoryBackend protocol: long-term memory entries as a store keeps them, by user.

Every method names the user it reads or writes (the writer's queue excepted: its jobs name
their user), so no query can reach another user's entries. The records here are what the
database holds; what may become an entry, and how recall scores one, is decided above the
store (``threadline.memory``). ``stores/memory_conformance.py`` states this contract as tests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from threadline.errors import NotFound
from threadline.items import format_time
from threadline.stores.rows import stored_time


class MemoryKind(StrEnum):
    FACT = "fact"            # semantic: something true about the user or their world
    EPISODE = "episode"      # a session's summary
    PROCEDURE = "procedure"  # how the user wants something done
    TURN = "turn"            # the user's message as said, dated: what facts came from


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
        moment = moment_text
        return {"user_id": self.user_id, "id": self.id, "kind": str(self.kind),
                "text": self.text, "source": str(self.source), "trusted": self.trusted,
                "conversation_id": self.conversation_id, "item_seqs": list(self.item_seqs),
                "recorded_at": moment(self.recorded_at), "valid_from": moment(self.valid_from),
                "valid_to": moment(self.valid_to), "expires_at": moment(self.expires_at),
                "supersedes": self.supersedes, "invalidated_at": moment(self.invalidated_at),
                "invalidated_by": self.invalidated_by, "reason": self.reason}


# an entry's fields as stored, in the order entry_from_row reads them
ENTRY_COLUMNS = ("user_id", "id", "kind", "text", "source", "trusted", "conversation_id",
                 "item_seqs", "recorded_at", "valid_from", "valid_to", "expires_at",
                 "supersedes", "invalidated_at", "invalidated_by", "reason")
_ID, _KIND, _TEXT, _TRUSTED, _CONVERSATION, _SEQS, _RECORDED = (
    ENTRY_COLUMNS.index(c) for c in ("id", "kind", "text", "trusted", "conversation_id",
                                     "item_seqs", "recorded_at"))


def entry_from_row(row: Sequence[Any]) -> MemoryEntry:
    """A row of ``ENTRY_COLUMNS`` as an entry (times are text on SQLite, timestamps on
    PostgreSQL)."""
    def moment(value: Any) -> datetime | None:
        return None if value is None else stored_time(value)
    recorded = moment(row[8])
    assert recorded is not None
    return MemoryEntry(row[0], row[1], MemoryKind(row[2]), row[3], Source(row[4]),
                       bool(row[5]), row[6], tuple(json.loads(row[7])), recorded,
                       moment(row[9]), moment(row[10]), moment(row[11]), row[12],
                       moment(row[13]), row[14], row[15])


def moment_text(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


class MemoryHit:
    """An entry as recall scores it: its id, kind, text and trust, and the turn it came from,
    read from the row; the whole entry is decoded only for the hits recall keeps
    (``entry()``)."""

    __slots__ = ("id", "kind", "text", "trusted", "_row")

    def __init__(self, row: Sequence[Any]) -> None:
        self.id: str = row[_ID]
        self.kind = MemoryKind(row[_KIND])
        self.text: str = row[_TEXT]
        self.trusted = bool(row[_TRUSTED])
        self._row = row

    @property
    def origin(self) -> tuple[str | None, str]:
        """The conversation and items it came from (an entry added by hand: its own id), so
        a fact and the turn it was said in are one piece of evidence."""
        conversation, seqs = self._row[_CONVERSATION], self._row[_SEQS]
        return (conversation, seqs) if conversation is not None and seqs != "[]" else \
            (None, self.id)

    @property
    def recorded_at(self) -> datetime:
        moment = self._row[_RECORDED]
        return stored_time(moment)

    def entry(self) -> MemoryEntry:
        return entry_from_row(self._row)

    def __repr__(self) -> str:
        return f"MemoryHit({self.id!r}, {self.text!r}, trusted={self.trusted})"


class JobClaim(NamedTuple):
    """A queued item the writer now holds, until its claim expires."""

    conversation_id: str
    seq: int
    user_id: str


@dataclass(frozen=True)
class MemoryJob:
    conversation_id: str
    seq: int
    user_id: str
    status: str                      # pending | done | failed
    attempts: int
    decisions: list[dict[str, Any]] | None
    error: str | None

    def to_json(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "seq": self.seq,
                "user_id": self.user_id, "status": self.status, "attempts": self.attempts,
                "decisions": self.decisions, "error": self.error}


class MemoryBackend(Protocol):
    """Memory entries, their embeddings and the writer's queue, in the log's database. Every
    method either completes or changes nothing."""

    # -- entries -------------------------------------------------------------------------

    def insert(self, entries: Sequence[MemoryEntry]) -> None:
        """Add all of ``entries`` or none; InputError if one names a conversation that does
        not exist."""
        ...

    def revise(self, entry_id: str, replacement: MemoryEntry, reason: str) -> None:
        """Add ``replacement`` and invalidate its user's current entry ``entry_id`` by it (at
        ``replacement.recorded_at``): UnknownMemory if the user has no such entry, InputError
        if it was already revised or withdrawn."""
        ...

    def invalidate(self, user_id: str, entry_id: str, at: datetime,
                   reason: str) -> MemoryEntry:
        """Withdraw a current entry (kept as history); the entry as it is now."""
        ...

    def get(self, user_id: str, entry_id: str) -> MemoryEntry:
        """UnknownMemory unless the user has the entry."""
        ...

    def entries(self, user_id: str) -> list[MemoryEntry]:
        """All the user's entries, history included, oldest first (by recorded_at, id)."""
        ...

    def delete(self, user_id: str, entry_id: str) -> None:
        """Delete an entry for real, with the entries it replaced and their vectors."""
        ...

    def forget(self, user_id: str) -> int:
        """Delete the user's entries, their vectors and the writer's jobs for the user; how
        many entries went."""
        ...

    def purge_expired(self, now: datetime) -> int:
        """Delete every entry (any user's) expired at ``now``; how many."""
        ...

    # -- recall --------------------------------------------------------------------------

    def search(self, user_id: str, terms: Sequence[str], *, at: datetime,
               limit: int) -> list[MemoryHit]:
        """The user's entries current at ``at`` that match any of ``terms`` (words) in the
        full-text index, best first, at most ``limit``: the user and the moment are in the
        same statement as the match."""
        ...

    def hits(self, user_id: str, ids: Sequence[str]) -> list[MemoryHit]:
        """The user's entries among ``ids``, in that order (ids they lack are left out)."""
        ...

    def turns_said(self, user_id: str, around: Sequence[tuple[str, datetime, datetime]], *,
                   at: datetime) -> list[MemoryEntry]:
        """The user's turn entries current at ``at`` and recorded in any of ``around``'s
        windows (a conversation id, a start, an end: [start, end) in that conversation),
        oldest first, in one statement: what they said around the turns recall shows."""
        ...

    # -- embeddings ----------------------------------------------------------------------

    def unembedded(self, user_id: str) -> list[tuple[str, str]]:
        """(id, text) of the user's entries that have no vector yet."""
        ...

    def save_vectors(self, user_id: str, model: str,
                     vectors: Sequence[tuple[str, bytes]]) -> None:
        """Keep (entry id, vector) pairs; an entry deleted meanwhile, or one that has a vector
        already, is skipped."""
        ...

    def vectors(self, user_id: str, at: datetime) -> list[tuple[str, bytes]]:
        """(id, vector) of the user's entries current at ``at``."""
        ...

    # -- the writer's queue --------------------------------------------------------------

    def enqueue(self, conversation_id: str, seq: int, user_id: str) -> None:
        """Queue an item to learn from for a user (again: a no-op)."""
        ...

    def claim(self, now: float, until: float, limit: int) -> list[JobClaim]:
        """Claim up to ``limit`` pending jobs whose claim is free or expired at ``now``, until
        ``until``, each counted as an attempt; a job is claimed by one caller at a time."""
        ...

    def finish(self, conversation_id: str, seq: int,
               decisions: Sequence[Mapping[str, Any]]) -> None:
        """Mark a job done, with what was decided."""
        ...

    def fail(self, conversation_id: str, seq: int, error: str, max_attempts: int) -> None:
        """Record a job's failure and free its claim: pending again, or failed for good once
        it has had ``max_attempts``."""
        ...

    def jobs(self, status: str | None = None) -> list[MemoryJob]:
        """The queue (only ``status`` with one), by conversation and seq."""
        ...
