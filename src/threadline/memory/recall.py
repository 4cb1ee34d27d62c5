"""Recall: the few pieces of evidence in a user's memory that bear on a message, shown with
where they came from.

Candidates are the user's memory entries: the facts the writer extracted, and the turns they
came from (``turn`` entries: each message as said, with its date), which share their
provenance, so a fact and its turn count as one piece of evidence and the turn is shown.
Every search names the user in the same statement as its match, and only entries current at
the moment asked (not revised or withdrawn, not expired, not past their validity) come back.

1. the full-text index ranks the entries that share a word with the query; with embeddings
   (``memory.dense``), the nearest by similarity are a second ranking;
2. the two rankings are fused (reciprocal rank fusion) and each piece of evidence is reranked
   on the fused rank, the share of the query it covers (a turn with the message said before
   it: ``memory.context``), its similarity to the query, and time
   (``memory.when``: a question about *when* favours turns that place something in time; a
   span the query names favours what was said during it), then by a logistic model over
   those, how many of the best were said the same day, and how much of the turn is a
   question, weighted by trust (an untrusted entry counts half); see ``memory.rank``;
3. unless some candidate bears on the query by itself (its relevance: the share of the
   query's words it covers, with embeddings the mean of that and its similarity, at least
   the threshold), nothing is recalled, so a question about something never said recalls
   nothing, and the context says so instead of offering the nearest unrelated memory; an
   untrusted candidate must reach the threshold itself to be shown.

The turn shows a small k of them, in its tail, each with its provenance: "the user said on
3 May 2026". ``Steps`` turns steps off, which is how the evaluation measures what each adds;
``RULES`` is the path before them (facts only, scored by the share of words covered).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from threadline.items import format_time
from threadline.memory.context import turn_contexts
from threadline.memory.dense import MemoryVectors
from threadline.memory.rank import (
    DENSE,
    DENSE_MODEL,
    LEXICAL,
    LEXICAL_MODEL,
    Candidate,
    Model,
    Weights,
    fuse,
    group,
    score,
)
from threadline.memory.store import MemoryEntry, MemoryKind, MemoryStore, Source, user_id_checked
from threadline.memory.when import TimeQuery, time_query
from threadline.rewrite.anchors import STOPWORDS
from threadline.stores.memory import MemoryHit
from threadline.trust import fence

K = 10              # pieces of evidence shown per turn
THRESHOLD = 0.25    # the relevance the best candidate needs, or recall abstains (dev-tuned)
DENSE_THRESHOLD = 0.25  # the same, with embeddings
RULES_THRESHOLD = 0.5  # the path before the steps: the share of the query's words covered
RULES_DENSE_THRESHOLD = 0.4  # … with embeddings, the mean of that and the similarity
UNTRUSTED_WEIGHT = 0.5
CANDIDATES = 50     # each ranking's depth before fusion
BESIDE = timedelta(hours=1)  # how far from a memory's turn the turns shown beside it were said

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")

_SAID = {Source.USER_STATED: "said", Source.USER_CONFIRMED: "confirmed",
         Source.MODEL_INFERRED: "was inferred (unconfirmed)",
         Source.TOOL_RETURNED: "came from a tool (unconfirmed)",
         Source.IMPORTED: "was imported"}


@dataclass(frozen=True)
class Steps:
    """Recall's steps, each adopted because it measured better on LoCoMo's dev split."""

    turns: bool = True   # the raw dated turns are candidates beside the facts from them
    time: bool = True    # a question about when, or naming a span, favours what fits it
    rerank: bool = True  # fused rank + coverage + similarity + time, not coverage alone
    context: bool = True  # a turn covers the words of the message before it too
    learned: bool = True  # the rerank's second pass: a logistic model, with day support and
    #                       how much of a turn asks (needs rerank)
    beside: bool = True   # a memory is shown with what the user said just before and after


ALL = Steps()
RULES = Steps(turns=False, time=False, rerank=False, context=False, learned=False,
              beside=False)


@dataclass(frozen=True)
class Recalled:
    entry: MemoryEntry
    score: float  # the candidate's score, times its trust weight
    related: tuple[str, ...] = ()  # the other entries of the same evidence (facts of a turn)
    # the user's own turns said just before and after it, in its conversation (``BESIDE``)
    beside: tuple[MemoryEntry, ...] = ()

    def provenance(self, who: str = "the user") -> str:
        """'the user said on 3 May 2026' (or confirmed, or …)."""
        when = self.entry.recorded_at
        return f"{who} {_SAID[self.entry.source]} on {when.day} {when:%B %Y}"

    def to_json(self) -> dict[str, Any]:
        e = self.entry
        return {"id": e.id, "text": e.text, "kind": str(e.kind), "source": str(e.source),
                "trusted": e.trusted, "recorded_at": format_time(e.recorded_at),
                "conversation_id": e.conversation_id, "item_seqs": list(e.item_seqs),
                "related": list(self.related), "score": round(self.score, 3),
                "beside": [b.id for b in self.beside]}


@dataclass(frozen=True)
class Scored:
    """Every candidate for a query, scored, before recall abstains or cuts to k."""

    terms: tuple[str, ...]
    candidates: list[Candidate]
    timings: dict[str, float]


@dataclass(frozen=True)
class Recall:
    query: str
    terms: tuple[str, ...]  # what the query was matched on
    memories: tuple[Recalled, ...]
    threshold: float
    # milliseconds per step (not recorded: the item stays a function of what was found)
    timings: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def abstained(self) -> bool:
        return not self.memories

    def render(self, who: str = "the user") -> str:
        """The memories as the turn's tail shows them, or a line saying there are none."""
        if not self.memories:
            return f"nothing remembered about {who} bears on this message"
        lines, beside = [], set()
        for m in self.memories:
            if m.entry.id in beside:
                continue  # shown already, beside a better memory (and given none of its own)
            lines.append(f"- ({m.entry.id}) {m.provenance(who)}: {_quoted(m.entry)}")
            lines += [f"  just {'before' if _seq(b) < _seq(m.entry) else 'after'}: "
                      f"{_quoted(b)}" for b in m.beside]
            beside |= {b.id for b in m.beside}
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "terms": list(self.terms), "threshold": self.threshold,
                "memories": [m.to_json() for m in self.memories]}


class MemoryRecall:
    """Recall over ``memory``; with ``dense`` (``memory.dense``), embeddings rank the entries
    too, so what was said in other words can be recalled."""

    def __init__(self, memory: MemoryStore, *, k: int = K, threshold: float | None = None,
                 untrusted_weight: float = UNTRUSTED_WEIGHT, candidates: int = CANDIDATES,
                 dense: MemoryVectors | None = None, steps: Steps = ALL,
                 weights: Weights | None = None, model: Model | None = None) -> None:
        self.memory, self.k, self.dense, self.steps = memory, k, dense, steps
        self.weights = weights or (DENSE if dense is not None else LEXICAL)
        self.model = (model or (DENSE_MODEL if dense is not None else LEXICAL_MODEL)) \
            if steps.learned else None
        self.threshold = threshold if threshold is not None else default_threshold(
            dense is not None, steps)
        self.untrusted_weight, self.candidates = untrusted_weight, candidates

    def recall(self, user_id: str, query: str, *, at: datetime | None = None,
               ignore: Iterable[str] = (), k: int | None = None) -> Recall:
        """The user's current memories that bear on ``query``, best first, at most ``k``.
        ``ignore`` names words not to match on (the user's own name: their memories are
        about them anyway)."""
        moment = at or self.memory.clock()  # read once: the steps all see the same moment
        found = self.scored(user_id, query, at=moment, ignore=ignore)
        started = time.perf_counter()
        candidates = self.shown(found.candidates)  # deciding to abstain counts as the rerank
        found.timings["rerank"] += (time.perf_counter() - started) * 1000
        kept = sorted(candidates, key=lambda c: -c.score)[: self.k if k is None else k]
        memories = tuple(_recalled(c) for c in kept)
        if self.steps.beside and memories:
            started = time.perf_counter()
            memories = self._beside(user_id, memories, moment)
            found.timings["beside"] = (time.perf_counter() - started) * 1000
        return Recall(query, found.terms, memories, self.threshold, found.timings)

    def _beside(self, user_id: str, memories: tuple[Recalled, ...], moment: datetime
                ) -> tuple[Recalled, ...]:
        """Each memory with what the user said just before and just after the message it
        came from, in its conversation and within ``BESIDE`` of it (read in one statement for
        all of them): a reply is often the answer the turn recall found asks for, or the
        detail it leaves out. Only the user's own turn entries current now: nobody else's
        words, nothing they deleted or withdrew; a turn a better memory showed already is not
        shown again (so the first k of them show the same whatever k)."""
        said = self.memory.backend.turns_said(user_id, [
            (e.conversation_id, e.recorded_at - BESIDE, e.recorded_at + BESIDE)
            for e in (m.entry for m in memories) if e.conversation_id and e.item_seqs],
            at=moment)
        shown: set[tuple[str | None, int]] = set()
        out = []
        for m in memories:
            entry = m.entry
            places = {(entry.conversation_id, s) for s in entry.item_seqs}
            if entry.conversation_id is None or not entry.item_seqs or places <= shown:
                shown |= places  # shown beside a better memory already: not shown again
                out.append(m)
                continue
            shown |= places
            first, last = min(entry.item_seqs), max(entry.item_seqs)
            mine = [t for t in said if t.conversation_id == entry.conversation_id and t.item_seqs
                    and -BESIDE <= t.recorded_at - entry.recorded_at < BESIDE]
            before = [t for t in mine if max(t.item_seqs) < first]
            after = [t for t in mine if min(t.item_seqs) > last]
            near = [t for t in (max(before, key=_seq, default=None),
                                min(after, key=_seq, default=None))
                    if t is not None and not any((t.conversation_id, s) in shown
                                                 for s in t.item_seqs)]
            shown |= {(t.conversation_id, s) for t in near for s in t.item_seqs}
            out.append(replace(m, beside=tuple(near)))
        return tuple(out)

    def scored(self, user_id: str, query: str, *, at: datetime | None = None,
               ignore: Iterable[str] = ()) -> Scored:
        """Every candidate for ``query`` among the user's current memories, scored, before
        recall abstains or keeps the best k (what the rerank's model was fitted on)."""
        timings: dict[str, float] = {}
        clock = _Stopwatch(timings)
        terms = query_terms(query, ignore)
        wanted = {_stem(t) for t in terms}
        moment = at or self.memory.clock()
        backend = self.memory.backend
        user_id_checked(user_id)
        # the full-text candidates: the user's entries current at the moment asked (both in
        # the same statement as the match), in the index's order
        hits = backend.search(user_id, terms, at=moment, limit=self.candidates) \
            if terms else []
        clock.lap("lexical")
        similar: dict[str, float] = {}
        rankings = [[h.id for h in hits if self._wanted(h)]]
        if self.dense is not None:
            similar = self.dense.similarities(user_id, first_person(query, ignore), at=moment)
            nearest = sorted(similar, key=lambda i: -similar[i])
            known = {hit.id for hit in hits}
            more = backend.hits(user_id, [i for i in nearest[: self.candidates * 2]
                                          if i not in known])
            hits += more
            wanted_ids = {h.id for h in hits if self._wanted(h)}
            rankings.append([i for i in nearest if i in wanted_ids][: self.candidates])
            clock.lap("dense")
        hits = [h for h in hits if self._wanted(h)]
        time_asked = time_query(query, moment) if self.steps.time else TimeQuery(False, None)
        # a turn covers the words of the message it answers too ("They're a real support"
        # after "How is your family taking it?"): read with it, not shown
        context = turn_contexts(self.memory, hits) if self.steps.context and \
            self.steps.turns else {}
        own = {h.id: _coverage(wanted, h.text) for h in hits}
        coverage = own | {i: _coverage(wanted, f"{context[i]} {h.text}")
                          for h in hits if (i := h.id) in context}
        clock.lap("context")
        candidates = group(hits, by_origin=self.steps.turns)
        if self.steps.rerank:
            score(candidates, fused=fuse(rankings), rankings=len(rankings), similar=similar,
                  coverage=coverage, time=time_asked, weights=self.weights,
                  untrusted_weight=self.untrusted_weight, dense=self.dense is not None,
                  own=own, model=self.model)
        else:
            self._score_by_words(candidates, coverage, similar)
        clock.lap("rerank")
        return Scored(terms, candidates, timings)

    def shown(self, candidates: list[Candidate]) -> list[Candidate]:
        """What may be shown: nothing unless some candidate bears on the query by itself
        (its relevance), and an untrusted one only if it does; the path before the rerank
        keeps what scores the threshold."""
        if not self.steps.rerank:
            return [c for c in candidates if c.score >= self.threshold]
        if not any(c.relevance >= self.threshold for c in candidates):
            return []
        return [c for c in candidates if c.trusted or c.relevance >= self.threshold]

    def _wanted(self, hit: MemoryHit) -> bool:
        return self.steps.turns or hit.kind is not MemoryKind.TURN

    def _score_by_words(self, candidates: list[Candidate], coverage: dict[str, float],
                        similar: dict[str, float]) -> None:
        """The path before reranking: the share of the query covered (with embeddings, the
        mean of that and the similarity), weighted by trust."""
        for c in candidates:
            hit = c.hits[0]
            value = coverage[hit.id]
            if self.dense is not None:
                value = (value + max(0.0, similar.get(hit.id, 0.0))) / 2
            c.score = value * (1.0 if hit.trusted else self.untrusted_weight)


def default_threshold(dense: bool, steps: Steps = ALL) -> float:
    if not steps.rerank:
        return RULES_DENSE_THRESHOLD if dense else RULES_THRESHOLD
    return DENSE_THRESHOLD if dense else THRESHOLD


def _seq(entry: MemoryEntry) -> int:
    return min(entry.item_seqs)


def _quoted(entry: MemoryEntry) -> str:
    """An entry's text as recall shows it: quoted, or fenced as data when not the user's."""
    return f"\"{entry.text}\"" if entry.trusted else fence("remembered", entry.text,
                                                             id=entry.id)


def _recalled(candidate: Candidate) -> Recalled:
    shown = candidate.shown
    return Recalled(shown.entry(), candidate.score,
                    tuple(h.id for h in candidate.hits if h is not shown))


def _coverage(wanted: set[str], text: str) -> float:
    if not wanted:
        return 0.0
    return len(wanted & {_stem(w) for w in _words(text)}) / len(wanted)


class _Stopwatch:
    def __init__(self, laps: dict[str, float]) -> None:
        self.laps, self.last = laps, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = (now - self.last) * 1000
        self.last = now


def query_terms(query: str, ignore: Iterable[str] = ()) -> tuple[str, ...]:
    """The query's content words, lower-cased, each once, in order; none of ``ignore``."""
    skip = {w.casefold() for name in ignore for w in _words(name)}
    out: list[str] = []
    for word in _words(query):
        word = re.sub(r"['’]s$", "", word.casefold())
        if word not in STOPWORDS and word not in skip and word not in out and len(word) > 1:
            out.append(word)
    return tuple(out)


def first_person(query: str, names: Iterable[str]) -> str:
    """``query`` with the user's own name read as "I" ("When did Ann paint?" → "When did I
    paint?"; "Ann's" → "my"): what the user said of themselves is in the first person, so
    that is what the embedding should compare."""
    for name in names:
        for word in dict.fromkeys((name, name.split()[0])) if name.strip() else ():
            pattern = re.escape(word)
            query = re.sub(rf"\b{pattern}['’]s\b", "my", query)
            query = re.sub(rf"\b{pattern}\b", "I", query)
    return query


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
