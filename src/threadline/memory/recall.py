"""Recall: the few memory entries that bear on a message, shown with where they came from.

A search names the user in the same statement as the full-text match, and only entries that
are current at the moment asked (not revised or withdrawn, not expired, not past their
validity) can come back. Candidates are ranked by the full-text index, then scored by how much
of the query they cover, weighted by trust (an untrusted entry needs to cover twice as much);
entries under the threshold are dropped, so a question about something never said recalls
nothing, and the context says so instead of offering the nearest unrelated memory. The turn
shows a small k of them, in its tail, each with its provenance: "the user said on 3 May 2026".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from threadline.items import format_time
from threadline.memory.dense import MemoryVectors
from threadline.memory.store import MemoryEntry, MemoryStore, Source, user_id_checked
from threadline.rewrite.anchors import STOPWORDS

K = 5               # memories shown per turn
THRESHOLD = 0.5     # the share of the query's words an entry must cover to be recalled
DENSE_THRESHOLD = 0.4  # with embeddings: the mean of that share and the similarity
UNTRUSTED_WEIGHT = 0.5
CANDIDATES = 50     # the full-text ranking's depth before scoring

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")

_SAID = {Source.USER_STATED: "said", Source.USER_CONFIRMED: "confirmed",
         Source.MODEL_INFERRED: "was inferred (unconfirmed)",
         Source.TOOL_RETURNED: "came from a tool (unconfirmed)",
         Source.IMPORTED: "was imported"}


@dataclass(frozen=True)
class Recalled:
    entry: MemoryEntry
    score: float  # the share of the query covered, times the entry's trust weight

    def provenance(self, who: str = "the user") -> str:
        """'the user said on 3 May 2026' (or confirmed, or …)."""
        when = self.entry.recorded_at
        return f"{who} {_SAID[self.entry.source]} on {when.day} {when:%B %Y}"

    def to_json(self) -> dict[str, Any]:
        e = self.entry
        return {"id": e.id, "text": e.text, "kind": str(e.kind), "source": str(e.source),
                "trusted": e.trusted, "recorded_at": format_time(e.recorded_at),
                "conversation_id": e.conversation_id, "item_seqs": list(e.item_seqs),
                "score": round(self.score, 3)}


@dataclass(frozen=True)
class Recall:
    query: str
    terms: tuple[str, ...]  # what the query was matched on
    memories: tuple[Recalled, ...]
    threshold: float

    @property
    def abstained(self) -> bool:
        return not self.memories

    def render(self, who: str = "the user") -> str:
        """The memories as the turn's tail shows them, or a line saying there are none."""
        if not self.memories:
            return f"nothing remembered about {who} bears on this message"
        return "\n".join(f"- ({m.entry.id}) {m.provenance(who)}: \"{m.entry.text}\""
                         for m in self.memories)

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "terms": list(self.terms), "threshold": self.threshold,
                "memories": [m.to_json() for m in self.memories]}


class MemoryRecall:
    """Recall over ``memory``; with ``dense`` (``memory.dense``), an entry's score is the
    mean of the share of the query it covers and its embedding's similarity to the query, so
    what was said in other words can be recalled too."""

    def __init__(self, memory: MemoryStore, *, k: int = K, threshold: float | None = None,
                 untrusted_weight: float = UNTRUSTED_WEIGHT, candidates: int = CANDIDATES,
                 dense: MemoryVectors | None = None) -> None:
        self.memory, self.k, self.dense = memory, k, dense
        self.threshold = threshold if threshold is not None else \
            DENSE_THRESHOLD if dense is not None else THRESHOLD
        self.untrusted_weight, self.candidates = untrusted_weight, candidates

    def recall(self, user_id: str, query: str, *, at: datetime | None = None,
               ignore: Iterable[str] = (), k: int | None = None) -> Recall:
        """The user's current memories that bear on ``query``, best first, at most ``k``.
        ``ignore`` names words not to match on (the user's own name: their memories are
        about them anyway)."""
        terms = query_terms(query, ignore)
        wanted = {_stem(t) for t in terms}
        backend = self.memory.backend
        # the full-text candidates: the user's entries current at the moment asked (both in
        # the same statement as the match), in the index's order
        hits = backend.search(user_id_checked(user_id), terms, at=at or self.memory.clock(),
                              limit=self.candidates) if terms else []
        similar: dict[str, float] = {}
        if self.dense is not None:
            similar = self.dense.similarities(user_id, query, at=at)
            known = {hit.id for hit in hits}
            nearest = sorted(similar, key=lambda i: -similar[i])[: self.candidates]
            hits += backend.hits(user_id_checked(user_id),
                                 [i for i in nearest if i not in known])
        scored = []
        for hit in hits:  # scored on the light hit: decode only what is kept
            words = {_stem(w) for w in _words(hit.text)}
            score = len(wanted & words) / len(wanted) if wanted else 0.0
            if self.dense is not None:
                score = (score + max(0.0, similar.get(hit.id, 0.0))) / 2
            score *= 1.0 if hit.trusted else self.untrusted_weight
            if score >= self.threshold:
                scored.append((score, hit))
        scored.sort(key=lambda pair: -pair[0])  # stable: the index's order breaks ties
        return Recall(query, terms, tuple(Recalled(hit.entry(), score) for score, hit
                                          in scored[: self.k if k is None else k]),
                      self.threshold)


def query_terms(query: str, ignore: Iterable[str] = ()) -> tuple[str, ...]:
    """The query's content words, lower-cased, each once, in order; none of ``ignore``."""
    skip = {w.casefold() for name in ignore for w in _words(name)}
    out: list[str] = []
    for word in _words(query):
        word = re.sub(r"['’]s$", "", word.casefold())
        if word not in STOPWORDS and word not in skip and word not in out and len(word) > 1:
            out.append(word)
    return tuple(out)


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


@lru_cache(maxsize=65_536)  # words repeat across entries and turns: stem each once
def _stem(word: str) -> str:
    """A light suffix strip, enough to match "groups" with "group" and "painted" with
    "painting" when scoring; the index does the real stemming."""
    word = re.sub(r"['’]s$", "", word.casefold())
    for suffix, keep in (("ies", 4), ("ing", 5), ("ed", 4), ("s", 3)):
        if word.endswith(suffix) and len(word) > keep and not word.endswith("ss"):
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return word.rstrip("e").replace("y", "i") if len(word) > 3 else word
