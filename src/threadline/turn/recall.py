"""Recall: what is remembered about the user that bears on this turn's message.

It runs after the message is durable and before assembly, and is recorded as one
``memory_recall`` item after the message (the query, the terms matched, each memory with its
id, source, trust, score and provenance, and the text the model is shown), so the exact
request stays a function of the log. Assembly shows it in the tail of the current turn only,
never above the history; when nothing is above the threshold the tail says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from threadline.items import Item, ItemKind, NewItem
from threadline.memory.recall import MemoryRecall
from threadline.rewrite import DETERMINISTIC, race
from threadline.rewrite.deterministic import turns_of


def recall(memory: MemoryRecall, user_id: str, history: Sequence[Item], text: str, *,
           deadline_s: float, query: str | None = None) -> NewItem:
    """The recall item for ``text`` sent by ``user_id`` after ``history``. The message is
    made standalone first, so "and the year before?" recalls what the conversation was
    about: ``query`` if the turn already rewrote it (to search a corpus), else without a
    model (this is on the request path)."""
    if query is None:
        query = race([DETERMINISTIC], turns_of(history), text, deadline_s=deadline_s).rewritten
    found = memory.recall(user_id, query)
    return NewItem(ItemKind.RECALL, {**found.to_json(), "text": found.render()})

