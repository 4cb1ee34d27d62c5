"""Transcript hashes over SQL: finding where in the log a client's resent history is.

Every item row carries its transcript hash (``items.transcript_hash``): chained over the
conversation's system prompt and its user and assistant messages only, the part of a
conversation a chat client sees and resends. Other items pass their parent's hash on, so a
branch head always carries the hash of the transcript that leads to it. A partial index over
the message rows makes matching a resent history one lookup, however many conversations the
store holds. Written once for both databases, like the log in ``stores/relational.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from threadline.items import ItemKind, transcript_after, transcript_root
from threadline.stores.base import TranscriptMatch
from threadline.stores.sessions import Session

_MESSAGES = "kind IN ('user_message', 'assistant_message')"  # as the partial index says
_LOOKUP_BATCH = 500  # hashes per statement: well under every driver's parameter limit


class TranscriptsSQL:
    """Transcript hashes; the class it is mixed into opens the transactions."""

    def _transaction(self) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def _reading(self) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def matching_messages(self, hashes: Sequence[str], *, conversation_id: str | None = None,
                          user_id: str | None = None,
                          limit: int | None = None) -> list[TranscriptMatch]:
        scope, extra = "", []
        if conversation_id is not None:
            scope, extra = " AND conversation_id = ?", [conversation_id]
        if user_id is not None:
            scope += " AND conversation_id IN (SELECT id FROM conversations WHERE owner = ?)"
            extra.append(user_id)
        # newest first: conversation ids are time-ordered, and so are seqs
        order = " ORDER BY conversation_id DESC, seq DESC" + (
            "" if limit is None else f" LIMIT {int(limit)}")
        found: list[TranscriptMatch] = []
        with self._reading() as db:
            for start in range(0, len(hashes), _LOOKUP_BATCH):
                batch = list(dict.fromkeys(hashes[start:start + _LOOKUP_BATCH]))
                marks = ", ".join("?" * len(batch))
                rows = db.all(f"SELECT transcript, conversation_id, seq, branch FROM items "
                              f"WHERE transcript IN ({marks}) AND {_MESSAGES}{scope}{order}",
                              (*batch, *extra))
                found += [TranscriptMatch(str(r[0]), str(r[1]), int(r[2]), str(r[3]))
                          for r in rows]
        return found[:limit]

    def transcript(self, conversation_id: str, seq: int) -> str | None:
        with self._reading() as db:
            row = db.one("SELECT transcript FROM items WHERE conversation_id = ? AND seq = ?",
                         (conversation_id, seq))
        return None if row is None else row[0]

    def fill_transcripts(self) -> int:
        """Give the rows written before transcript hashes existed theirs (see
        :func:`fill_missing`); the number of conversations filled in."""
        with self._transaction() as db:
            return fill_missing(db)


def fill_missing(db: Session) -> int:
    """Fill in the transcript hashes of every conversation that lacks some (rows written
    before the migration that added them); how many there were. The lookup uses an index
    that holds only such rows, so it costs nothing once they are filled."""
    rows = db.all("SELECT DISTINCT conversation_id FROM items WHERE transcript IS NULL")
    for row in rows:
        fill_conversation(db, str(row[0]))
    return len(rows)


def fill_conversation(db: Session, conversation_id: str) -> None:
    """Compute every item's transcript hash in one conversation (parents come first: a seq
    is always greater than its parent's)."""
    row = db.one("SELECT system FROM conversations WHERE id = ?", (conversation_id,))
    root = transcript_root(None if row is None else row[0])
    rows = db.all("SELECT seq, parent_seq, kind, content FROM items WHERE conversation_id = ?"
                  " ORDER BY seq", (conversation_id,))
    hashes: dict[int, str] = {}
    for seq, parent_seq, kind, content in rows:
        parent = root if parent_seq is None else hashes[int(parent_seq)]
        hashes[int(seq)] = transcript_after(parent, ItemKind(kind), _content(kind, content))
    for seq, digest in hashes.items():
        db.run("UPDATE items SET transcript = ? WHERE conversation_id = ? AND seq = ?",
               (digest, conversation_id, seq))


def root_of(db: Session, conversation_id: str, system: str | None = None,
            creating: bool = False) -> str:
    """The transcript hash before a conversation's first item (its system prompt's)."""
    if not creating:
        row = db.one("SELECT system FROM conversations WHERE id = ?", (conversation_id,))
        system = None if row is None else row[0]
    return transcript_root(system)


def _content(kind: str, content: str) -> dict[str, Any]:
    # only messages' text counts: the rest need not be parsed
    return json.loads(content) if kind in ("user_message", "assistant_message") else {}
