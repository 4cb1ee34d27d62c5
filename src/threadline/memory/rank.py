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
- ``span``: the query names a span of time, and it was said during it or soon after;
- ``day_support``: how many of the others that rank best by the features above were said the
  same day (what bears on a question is told together, in one conversation, more often than
  apart);
- ``asking``: the share of the turn's sentences that are questions (a question the user asks
  says little about the user: "What kind of music do you play?").

No cross-encoder or reranking model ships inside a package on PyPI (see docs/memory.md), so
the rerank is over the model recall already runs, in two passes: a weighted sum of the first
five features ranks the candidates (``Weights``), which gives each its day support, then a
logistic model over all seven, and the coverage by a turn's own words (``own_coverage``,
without its context), scores them (``Model``); both were fitted on LoCoMo's dev
conversations only (BENCHMARKS.md; the model by ``bench/locomo_rerank.py``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from threadline.memory.when import TimeQuery, places_in_time
from threadline.stores.memory import MemoryHit, MemoryKind

RRF_K = 60  # the usual constant of reciprocal rank fusion
DAY_TOP = 10  # day support counts among this many best by the weighted sum
DAY_CAP = 4   # … and this many others said the same day is full support
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


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


@dataclass(frozen=True)
class Model:
    """A logistic model of whether a candidate is evidence for the query: its coefficients
    on the raw features (in ``FEATURES`` order) and its intercept."""

    fused: float
    coverage: float
    own_coverage: float
    similarity: float
    when: float
    span: float
    day_support: float
    asking: float
    intercept: float

    def probability(self, features: Sequence[float]) -> float:
        z = self.intercept + sum(getattr(self, name) * x
                                 for name, x in zip(FEATURES, features, strict=True))
        return 1.0 / (1.0 + math.exp(-z))


# the model's features, in the order of its coefficients
FEATURES = ("fused", "coverage", "own_coverage", "similarity", "when", "span", "day_support",
            "asking")
# fitted on LoCoMo's dev conversations (L2 logistic regression, bench/locomo_rerank.py)
DENSE_MODEL = Model(fused=2.6533, coverage=3.6639, own_coverage=-1.2053, similarity=3.5765,
                    when=1.0947, span=1.0464, day_support=1.5819, asking=-2.2547,
                    intercept=-8.3262)
LEXICAL_MODEL = Model(fused=8.0392, coverage=6.2811, own_coverage=-2.6974, similarity=0.0,
                      when=1.5103, span=1.4984, day_support=1.2722, asking=-2.777,
                      intercept=-12.34)


@dataclass
class Candidate:
    """One piece of evidence and the entries that make it up, best representative first."""

    hits: list[MemoryHit] = field(default_factory=list)
    fused: float = 0.0
    coverage: float = 0.0
    own_coverage: float = 0.0  # by the entries' own words (without a turn's context)
    similarity: float = 0.0
    when: bool = False
    span: bool = False
    day_support: float = 0.0
    asking: float = 0.0
    prior: float = 0.0      # the weighted sum, trust-weighted: the first pass's rank
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

    def features(self) -> tuple[float, ...]:
        """The model's features, in ``FEATURES`` order."""
        return tuple(float(getattr(self, name)) for name in FEATURES)


def asking(text: str) -> float:
    """The share of ``text``'s sentences that are questions."""
    sentences = [s for s in (s.strip() for s in _SENTENCE.findall(text)) if s]
    return sum(s.endswith("?") for s in sentences) / len(sentences) if sentences else 0.0


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
          own: Mapping[str, float] | None = None, model: Model | None = None) -> None:
    """Fill in each candidate's features, score and relevance (in place). The score ranks:
    the weighted sum, or with ``model`` its probability of being evidence (then the weighted
    sum is the first pass, which gives the day support); the relevance (the share of the
    query covered, with embeddings the mean of that and the similarity) says whether
    anything bears on the query at all: a rank is relative, and the best of unrelated
    candidates still ranks first. ``own``: the coverage by each entry's own words, when
    ``coverage`` counts more (a turn's context): relevance is judged on what the entry says
    itself. Scores are trust-weighted (an untrusted candidate counts ``untrusted_weight``)."""
    own = coverage if own is None else own
    best = rankings / (RRF_K + 1)  # the fused score of an entry first in every ranking
    for c in candidates:
        ids = [h.id for h in c.hits]
        c.fused = max(fused.get(i, 0.0) for i in ids) / best if best else 0.0
        c.coverage = max(coverage.get(i, 0.0) for i in ids)
        c.own_coverage = max(own.get(i, 0.0) for i in ids)
        c.similarity = max(max(0.0, similar.get(i, 0.0)) for i in ids)
        c.when = time.asks_when and any(places_in_time(h.text) for h in c.hits)
        c.span = time.span is not None and time.span.holds(c.shown.recorded_at)
        trust = 1.0 if c.trusted else untrusted_weight
        c.score = c.prior = (weights.fused * c.fused + weights.coverage * c.coverage
                             + weights.similarity * c.similarity + weights.when * c.when
                             + weights.span * c.span) * trust
        c.relevance = max((own.get(i, 0.0) + max(0.0, similar.get(i, 0.0))) / 2
                          if dense else own.get(i, 0.0) for i in ids) * trust
    if model is None:
        return
    support(candidates)
    for c in candidates:
        c.asking = asking(c.shown.text)
        c.score = model.probability(c.features()) * (1.0 if c.trusted else untrusted_weight)


def support(candidates: Sequence[Candidate]) -> None:
    """Each candidate's day support: of the ``DAY_TOP`` best by the first pass, how many
    others were said the same day as it (up to ``DAY_CAP``, as a share of that)."""
    day = [c.shown.recorded_at.date() for c in candidates]
    best = sorted(range(len(candidates)), key=lambda n: -candidates[n].prior)[:DAY_TOP]
    said = Counter(day[n] for n in best)
    ranked = set(best)
    for n, c in enumerate(candidates):
        c.day_support = min(said[day[n]] - (n in ranked), DAY_CAP) / DAY_CAP
