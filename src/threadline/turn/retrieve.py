"""Retrieve: the turn's message as a standalone query, and the corpus passages it finds.

It runs before the message is written, so a query with nothing to search for is refused with
nothing saved. What it found is recorded as one ``retrieval`` item after the message (the raw
and rewritten query, which rewriter won and how fast, the passages verbatim with their ids);
assembly shows those passages in the tail of the current turn only, never above the history,
so they do not disturb the cached prefix, and the exact request stays a function of the log.
"""

from __future__ import annotations

from collections.abc import Sequence

from threadline.items import Item, ItemKind, NewItem
from threadline.retrieval.corpus import Corpus
from threadline.rewrite import Rewriter, RewriteResult, race
from threadline.rewrite.deterministic import turns_of

PASSAGES = 5


def retrieve(corpora: Corpus, corpus: str, history: Sequence[Item], text: str, *,
             rewriters: Sequence[Rewriter], deadline_s: float,
             limit: int = PASSAGES) -> NewItem:
    """The retrieval item for ``text`` asked after ``history``."""
    rewritten: RewriteResult = race(rewriters, turns_of(history), text, deadline_s=deadline_s)
    passages = corpora.search(corpus, rewritten.rewritten, limit=limit)
    return NewItem(ItemKind.RETRIEVAL, {
        **rewritten.to_json(), "query": rewritten.rewritten, "corpus": corpus,
        "passages": [p.to_json() for p in passages]})


def recorded_for(history: Sequence[Item], message: Item, kind: ItemKind) -> Item | None:
    """The ``kind`` item (a retrieval, a recall) recorded for ``message``'s turn, if any."""
    for item in reversed(history):
        if item.seq <= message.seq:
            return None
        if item.kind is kind:
            return item
    return None
