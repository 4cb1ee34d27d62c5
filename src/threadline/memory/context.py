"""A turn's context: the end of the message said just before it in its conversation.

A reply often says nothing by itself of what it answers ("They're a real support" answers
"How is your family taking it?"). Recall reads a turn together with its context: the
embedding has a row for it (``memory.dense``), and the share of the query's words a turn
covers counts the context's words too (``memory.recall``). What is shown is the turn as said.
"""

from __future__ import annotations

from collections.abc import Iterable

from threadline.errors import NotFound
from threadline.items import ItemKind
from threadline.memory.store import MemoryEntry, MemoryKind, MemoryStore
from threadline.stores.memory import MemoryHit

# how much of the message before a turn its context takes: the end of it, where the question
# the turn answers usually is, short enough to leave the turn inside the embedding model's
# 256-token window
CONTEXT_CHARS = 400
_SAID = (ItemKind.USER, ItemKind.ASSISTANT)


def turn_contexts(memory: MemoryStore, hits: Iterable[MemoryHit]) -> dict[str, str]:
    """For each turn among ``hits``, by id, the end of the message said just before it (the
    user's or the assistant's), when there is one; facts and entries added by hand have
    none."""
    found: dict[str, str] = {}
    for hit in hits:
        if hit.kind is MemoryKind.TURN:
            text = _before(memory, hit.entry())
            if text:
                found[hit.id] = text[-CONTEXT_CHARS:]
    return found


def _before(memory: MemoryStore, turn: MemoryEntry) -> str | None:
    if turn.conversation_id is None or not turn.item_seqs or min(turn.item_seqs) <= 1:
        return None
    try:
        item = memory.store.item(turn.conversation_id, min(turn.item_seqs) - 1)
    except NotFound:  # gone with its conversation, or never there
        return None
    text = item.text if item.kind in _SAID else ""
    return " ".join(text.split()) or None
