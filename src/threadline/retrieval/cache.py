"""The answer cache, with scope: an answer is served again only to the same question finding
the same passages.

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

from threadline.items import format_time, utc_now
from threadline.retrieval.corpus import Corpus
from threadline.rewrite.anchors import must_preserve

SIMILAR = 0.92
_PUNCTUATION = re.compile(r"[^\w\s]")


@dataclass(frozen=True)
class CachedAnswer:
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


class AnswerCache:
    def __init__(self, corpora: Corpus) -> None:
        self.corpora = corpora

    def find(self, corpus: str, query: str, passages: Sequence[str]) -> CachedAnswer | None:
        """The cached answer to serve for ``query`` finding ``passages``, if any."""
        found = json.dumps(sorted(passages))
        with self.corpora.store.session() as db:
            exact = db.one("SELECT answer, conversation_id, reply_seq, call_id FROM answer_cache"
                           " WHERE corpus = ? AND query_key = ? AND passages = ?"
                           " ORDER BY id DESC LIMIT 1", (corpus, query_key(query), found))
            if exact is not None:
                return CachedAnswer(exact[0], "exact", exact[1], exact[2], exact[3], 1.0)
            candidates = db.all("SELECT answer, conversation_id, reply_seq, call_id, vector, id"
                                " FROM answer_cache WHERE corpus = ? AND anchors = ? AND"
                                " passages = ? AND vector IS NOT NULL ORDER BY id",
                                (corpus, anchor_key(query), found))
        if not candidates or not self.corpora.dense(corpus):
            return None
        embedder = self.corpora.embedder()
        ranked = embedder.rank(query, [(str(row[5]), row[4]) for row in candidates])
        best = next(row for row in candidates if str(row[5]) == ranked[0])
        similarity = embedder.similarity(query, best[4])
        if similarity < SIMILAR:
            return None
        return CachedAnswer(best[0], "semantic", best[1], best[2], best[3], similarity)

    def put(self, corpus: str, query: str, passages: Sequence[str], answer: str, *,
            conversation_id: str, reply_seq: int, call_id: str) -> None:
        vector = self.corpora.embedder().embed([query])[0] if self.corpora.dense(corpus) \
            else None
        with self.corpora.store.session(write=True) as db:
            db.run("INSERT INTO answer_cache (corpus, query_key, anchors, passages, answer,"
                   " conversation_id, reply_seq, call_id, vector, created_at)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (corpus, query_key(query), anchor_key(query), json.dumps(sorted(passages)),
                    answer, conversation_id, reply_seq, call_id, vector,
                    format_time(utc_now())))
