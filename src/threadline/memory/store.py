"""Long-term memory entries, kept beside the log and partitioned by user.

Every read and write names the user: the store's memory (``stores/memory.py``) puts it in the
key of every statement (``WHERE user_id = ? AND ...``), with no query that reads entries first
and filters by user afterwards, so one user's question cannot reach another user's memory.
This module decides what may become an entry. An entry records where it came from (the
conversation and items, and whether the user said it, confirmed it, the model inferred it, a
tool returned it or it was imported) and how far it is trusted (by default, only what the user
stated or confirmed), when threadline learned it, when it holds in the world, and when it must
go. Revising an entry invalidates it and records what replaced it; deleting, forgetting a user
and the retention purge delete rows for real.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from threadline.errors import InputError
from threadline.items import new_id, utc_now
from threadline.stores.base import Store
from threadline.stores.memory import (
    TRUSTED_SOURCES,
    MemoryBackend,
    MemoryEntry,
    MemoryKind,
    Source,
    UnknownMemory,
    entry_from_row,
)

__all__ = ["MAX_TEXT_BYTES", "TRUSTED_SOURCES", "MemoryEntry", "MemoryKind", "MemoryStore",
           "NewMemory", "Source", "UnknownMemory", "entry_from_row", "memory_of",
           "user_id_checked"]

MAX_TEXT_BYTES = 4096


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


def memory_of(store: Store) -> MemoryBackend:
    """The store's memory, or an InputError for a store that keeps none."""
    backend = store.memory
    if backend is None:
        raise InputError(f"{type(store).__name__} keeps no memory",
                         hint="use a SQLite or PostgreSQL store for memory")
    return backend


class MemoryStore:
    """Memory entries in ``store``'s database (its ``memory``; InputError if it keeps none)."""

    def __init__(self, store: Store, *,
                 clock: Callable[[], datetime] = utc_now,
                 max_text_bytes: int = MAX_TEXT_BYTES) -> None:
        self.store, self.clock, self.max_text_bytes = store, clock, max_text_bytes
        self.backend = memory_of(store)

    def add(self, user_id: str, memory: NewMemory) -> MemoryEntry:
        """Record ``memory`` for the user. Trusted only if the user stated or confirmed it."""
        entry = self._entry(user_id, memory)
        self.backend.insert([entry])
        return entry

    def add_many(self, user_id: str, memories: Sequence[NewMemory]) -> list[MemoryEntry]:
        """Record all of ``memories`` or none (an import): every one is checked before the
        single write, and a failure inside it rolls the whole write back."""
        user_id_checked(user_id)  # a bad user id is not any one entry's fault
        entries = []
        for index, memory in enumerate(memories):
            try:
                entries.append(self._entry(user_id, memory))
            except InputError as err:
                raise InputError(f"entry {index}: {err.message}", hint=err.hint) from err
        self.backend.insert(entries)
        return entries

    def update(self, user_id: str, entry_id: str, memory: NewMemory,
               reason: str = "revised") -> MemoryEntry:
        """Replace a current entry: the old one is invalidated and kept as history."""
        new = replace(self._entry(user_id, memory), supersedes=entry_id)
        self.backend.revise(entry_id, new, reason)
        return new

    def correct(self, user_id: str, entry_id: str, text: str) -> MemoryEntry:
        """The user's correction of a current entry (``threadline memory edit``, the
        inspector's edit): the new text, user-stated, keeping the entry's kind, provenance
        and validity; the old entry stays as history."""
        old = self.get(user_id, entry_id)
        return self.update(user_id, entry_id, NewMemory(
            text, old.kind, Source.USER_STATED, old.conversation_id, old.item_seqs,
            old.valid_from, old.valid_to, old.expires_at), reason="edited by the user")

    def invalidate(self, user_id: str, entry_id: str, reason: str) -> MemoryEntry:
        """Withdraw a current entry (kept as history until deleted)."""
        return self.backend.invalidate(user_id_checked(user_id), entry_id, self.clock(),
                                       reason)

    def get(self, user_id: str, entry_id: str) -> MemoryEntry:
        return self.backend.get(user_id_checked(user_id), entry_id)

    def entries(self, user_id: str, *, at: datetime | None = None,
                history: bool = False) -> list[MemoryEntry]:
        """The user's current entries at ``at`` (default: now), oldest first; with
        ``history`` also the revised, withdrawn, expired and past ones."""
        found = self.backend.entries(user_id_checked(user_id))
        moment = at or self.clock()
        return found if history else [e for e in found if e.current(moment)]

    def delete(self, user_id: str, entry_id: str) -> None:
        """Delete an entry for real, with the entries it replaced."""
        self.backend.delete(user_id_checked(user_id), entry_id)

    def forget(self, user_id: str) -> int:
        """Delete everything remembered about the user (their entries, with their vectors,
        and the writer's jobs for them: a pending one would learn it all again, a done one
        keeps what it decided); how many entries went."""
        return self.backend.forget(user_id_checked(user_id))

    def purge_expired(self, now: datetime | None = None) -> int:
        """The retention job: delete (not hide) every entry past its expiry."""
        return self.backend.purge_expired(now or self.clock())

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


def user_id_checked(user_id: str) -> str:
    if not user_id or user_id != user_id.strip() or len(user_id) > 200:
        raise InputError(f"invalid user id {user_id!r}: use 1-200 characters, no surrounding "
                         "spaces")
    return user_id
