"""What the memory page shows: a user's entries as chains of revisions.

An edit or a revision by the writer never overwrites an entry: the new one ``supersedes`` the
old, which is invalidated and kept as history (``memory/store.py``). The page shows each
current entry with the versions it replaced, newest first, and apart from them what is no
longer current and was not replaced: withdrawn, expired, or past its validity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from threadline.memory import MemoryEntry


@dataclass(frozen=True)
class EntryChain:
    entry: MemoryEntry                  # the newest version
    revisions: tuple[MemoryEntry, ...]  # the versions it replaced, newest first
    current: bool

    @property
    def state(self) -> str:
        """Why an entry that is not current is not: the words the page uses."""
        e = self.entry
        if self.current:
            return "current"
        if e.invalidated_at is not None:
            return "withdrawn" + (f": {e.reason}" if e.reason else "")
        if e.valid_to is not None and (e.expires_at is None or e.valid_to <= e.expires_at):
            return "no longer holds"
        return "expired"


def chains(entries: Sequence[MemoryEntry], now: datetime) -> list[EntryChain]:
    """Every entry of ``entries`` (a user's, history included) in exactly one chain: current
    chains first, then the rest, each group oldest first as the store lists them."""
    by_id = {e.id: e for e in entries}
    replaced = {e.supersedes for e in entries if e.supersedes in by_id}
    out = []
    for entry in entries:
        if entry.id in replaced:
            continue  # shown in the chain of the entry that replaced it
        revisions: list[MemoryEntry] = []
        step = entry.supersedes
        while step is not None and step in by_id and len(revisions) < len(entries):
            revisions.append(by_id[step])
            step = by_id[step].supersedes
        out.append(EntryChain(entry, tuple(revisions), entry.current(now)))
    return sorted(out, key=lambda c: not c.current)
