"""Ranking recall's candidates: each piece of evidence scored on what several rankings and the
query say about it.

A candidate is one piece of evidence: a turn the user said and the facts the writer extracted
from it, which share its provenance (``MemoryHit.origin``), or an entry with no turn behind it
(added by hand, imported). Its features:

- ``fused``: reciprocal rank fusion of the full-text ranking (BM25 / ``ts_rank_cd``) and the
  embedding ranking, at its best entry; 1.0 at the top of both;
- ``coverage``: the share of the query's content words its texts hold (lightly stemmed);
- ``similarity``: the best cosine similarity of its entries to the query (with embeddings);
- ``when``: the query asks when, and the text places something in time ("yesterday");
- ``span``: the query names a span of time, and it was said during it or soon after.

No cross-encoder or reranking model ships inside a package on PyPI (see docs/memory.md), so
the rerank is this weighted sum over the model recall already runs; the weights were fitted on
LoCoMo's dev conversations only (BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from threadline.memory.when import TimeQuery, places_in_time
from threadline.stores.memory import MemoryHit, MemoryKind

RRF_K = 60  # the usual constant of reciprocal rank fusion


@dataclass(frozen=True)
class Weights:
    fused: float
    coverage: float
    similarity: float
    when: float
    span: float


# fitted on LoCoMo's dev conversations by a grid search for evidence recall@10 (BENCHMARKS.md)
LEXICAL = Weights(fused=0.833, coverage=0.167, similarity=0.0, when=0.333, span=0.167)
DENSE = Weights(fused=0.333, coverage=0.167, similarity=0.5, when=0.5, span=0.167)


@dataclass
class Candidate:
    """One piece of evidence and the entries that make it up, best representative first."""

    hits: list[MemoryHit] = field(default_factory=list)
    fused: float = 0.0
    coverage: float = 0.0
    similarity: float = 0.0
    when: bool = False
    span: bool = False
    score: float = 0.0      # the rank: how it compares with the other candidates
    relevance: float = 0.0  # how much it bears on the query by itself, trust-weighted

    @property
    def shown(self) -> MemoryHit:
        """The turn, when there is one (it holds what its facts say, as said), else the
        first-ranked entry."""
        return next((h for h in self.hits if h.kind is MemoryKind.TURN), self.hits[0])

    @property
    def trusted(self) -> bool:
        return any(h.trusted for h in self.hits)


def fuse(rankings: Iterable[Sequence[str]], *, k: int = RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion: each id's sum over the rankings of 1 / (k + rank)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, entry_id in enumerate(ranking, start=1):
            scores[entry_id] = scores.get(entry_id, 0.0) + 1.0 / (k + rank)
    return scores


def group(hits: Iterable[MemoryHit], *, by_origin: bool) -> list[Candidate]:
    """Hits as candidates, in the order first seen: with ``by_origin``, a turn and the facts
    from it are one."""
    found: dict[object, Candidate] = {}
    for hit in hits:
        key = hit.origin if by_origin else hit.id
        found.setdefault(key, Candidate()).hits.append(hit)
    return list(found.values())


def score(candidates: Sequence[Candidate], *, fused: Mapping[str, float], rankings: int,
          similar: Mapping[str, float], coverage: Mapping[str, float], time: TimeQuery,
          weights: Weights, untrusted_weight: float, dense: bool,
          own: Mapping[str, float] | None = None) -> None:
    """Fill in each candidate's features, score and relevance (in place). The score ranks;
    the relevance (the share of the query covered, with embeddings the mean of that and the
    similarity) says whether anything bears on the query at all: a rank is relative, and
    the best of unrelated candidates still ranks first. ``own``: the coverage by each entry's
    own words, when ``coverage`` counts more (a turn's context): relevance is judged on what
    the entry says itself."""
    own = coverage if own is None else own
    best = rankings / (RRF_K + 1)  # the fused score of an entry first in every ranking
    for c in candidates:
        ids = [h.id for h in c.hits]
        c.fused = max(fused.get(i, 0.0) for i in ids) / best if best else 0.0
        c.coverage = max(coverage.get(i, 0.0) for i in ids)
        c.similarity = max(max(0.0, similar.get(i, 0.0)) for i in ids)
        c.when = time.asks_when and any(places_in_time(h.text) for h in c.hits)
        c.span = time.span is not None and time.span.holds(c.shown.recorded_at)
        trust = 1.0 if c.trusted else untrusted_weight
        c.score = (weights.fused * c.fused + weights.coverage * c.coverage
                   + weights.similarity * c.similarity + weights.when * c.when
                   + weights.span * c.span) * trust
        c.relevance = max((own.get(i, 0.0) + max(0.0, similar.get(i, 0.0))) / 2
                          if dense else own.get(i, 0.0) for i in ids) * trust
