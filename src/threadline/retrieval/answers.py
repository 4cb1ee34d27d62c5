"""Saved answers, reused with scope: an answer is served again only to the same question
finding the same passages. (Not the prompt cache: that is ``threadline.cache``.)

Exact: the normalised rewritten query is the same. Semantic (corpora with embeddings): the
query means nearly the same (cosine ≥ ``SIMILAR``) *and* its must-preserve tokens are the same
set, so "cloud revenue in FY2025" never serves "cloud revenue in FY2024" however close the
vectors are. Both also require the search to have found the same passages (in any order):
once the corpus changes what a question finds, its old answer stops being served.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from threadline.items import utc_now
from threadline.retrieval.corpus import Corpus
from threadline.rewrite.anchors import must_preserve
from threadline.stores.corpus import NewAnswer

SIMILAR = 0.92
_PUNCTUATION = re.compile(r"[^\w\s]")


@dataclass(frozen=True)
class SavedAnswer:
    answer: str
    kind: str                # "exact" or "semantic"
    conversation_id: str
    reply_seq: int
    call_id: str
    similarity: float

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "conversation_id": self.conversation_id,
                "reply_seq": self.reply_seq, "call_id": self.call_id,
                "similarity": round(self.similarity, 4)}


def query_key(query: str) -> str:
    return " ".join(_PUNCTUATION.sub(" ", query.casefold()).split())


def anchor_key(query: str) -> str:
    return json.dumps(sorted({" ".join(t.casefold().split()) for t in must_preserve(query)}))


def passages_key(passages: Sequence[str]) -> str:
    """The passages an answer was given from, in any order."""
    return json.dumps(sorted(passages))


class SavedAnswers:
    def __init__(self, corpora: Corpus) -> None:
        self.corpora = corpora

    def find(self, corpus: str, query: str, passages: Sequence[str]) -> SavedAnswer | None:
        """The cached answer to serve for ``query`` finding ``passages``, if any."""
        found = passages_key(passages)
        backend = self.corpora.backend
        exact = backend.exact_answer(corpus, query_key(query), found)
        if exact is not None:
            return SavedAnswer(exact.answer, "exact", exact.conversation_id, exact.reply_seq,
                                exact.call_id, 1.0)
        candidates = backend.answers_by_anchors(corpus, anchor_key(query), found)
        if not candidates or not self.corpora.dense(corpus):
            return None
        embedder = self.corpora.embedder()
        vectors = {str(c.id): c.vector for c in candidates if c.vector is not None}
        ranked = embedder.rank(query, list(vectors.items()))
        best = next(c for c in candidates if str(c.id) == ranked[0])
        similarity = embedder.similarity(query, vectors[ranked[0]])
        if similarity < SIMILAR:
            return None
        return SavedAnswer(best.answer, "semantic", best.conversation_id, best.reply_seq,
                            best.call_id, similarity)

    def put(self, corpus: str, query: str, passages: Sequence[str], answer: str, *,
            conversation_id: str, reply_seq: int, call_id: str) -> None:
        vector = self.corpora.embedder().embed([query])[0] if self.corpora.dense(corpus) \
            else None
        self.corpora.backend.save_answer(NewAnswer(
            corpus, query_key(query), anchor_key(query), passages_key(passages), answer,
            conversation_id, reply_seq, call_id, vector, utc_now()))
