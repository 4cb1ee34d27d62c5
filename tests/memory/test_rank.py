"""The rerank's second pass: a logistic model over a candidate's features, with how many of the
best candidates were said the same day (day support) and how much of a turn is a question."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.memory.conftest import Clock
from threadline.memory import MemoryStore, NewMemory
from threadline.memory.rank import (
    DAY_CAP,
    DAY_TOP,
    DENSE_MODEL,
    FEATURES,
    LEXICAL_MODEL,
    Candidate,
    Model,
    asking,
    support,
)
from threadline.memory.recall import ALL, MemoryRecall
from threadline.memory.store import Source
from threadline.memory.writer import MemoryWriter
from threadline.models.scripted import ScriptedModel
from threadline.standard import standard_engine
from threadline.stores.relational import RelationalStore

DAY = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


def _model(**weights: float) -> Model:
    """A model with only the named coefficients (the rest, and the intercept, 0)."""
    return Model(**({f.name: 0.0 for f in fields(Model)} | weights))


def test_the_share_of_a_turn_that_asks() -> None:
    assert asking("What kind of music do you play?") == 1.0
    assert asking("Cool! What kind of music do you play?") == 0.5
    assert asking("I play bass in a band. We rehearse on Fridays!") == 0.0
    assert asking("") == 0.0


def test_the_model_is_a_probability_over_the_features_in_order() -> None:
    assert tuple(f.name for f in fields(Model))[:-1] == FEATURES
    assert _model().probability([0.0] * len(FEATURES)) == 0.5
    coverage = _model(coverage=2.0, intercept=-1.0)
    low, high = (coverage.probability([0, c, 0, 0, 0, 0, 0, 0]) for c in (0.0, 1.0))
    assert low == pytest.approx(1 / (1 + 2.718281828459045)) and high > 0.5 > low
    # what the fit says: covering and resembling the query count for, asking against
    for model in (DENSE_MODEL, LEXICAL_MODEL):
        assert model.fused > 0 and model.coverage > 0 and model.day_support > 0
        assert model.asking < 0
    assert DENSE_MODEL.similarity > 0 and LEXICAL_MODEL.similarity == 0.0


def test_day_support_counts_the_others_said_that_day_among_the_best(
        memory: MemoryStore, clock: Clock) -> None:
    ids = []
    for day, text in [(0, "one"), (0, "two"), (0, "three"), (1, "four"), (2, "five")]:
        clock.now = DAY + timedelta(days=day)
        ids.append(memory.add("ann", NewMemory(f"I said {text} things")).id)
    hits = memory.backend.hits("ann", ids)
    candidates = [Candidate(hits=[hit], prior=1.0 - n / 10) for n, hit in enumerate(hits)]
    support(candidates)
    # the first day's three each have two others; the other days' have none
    assert [c.day_support for c in candidates] == [2 / DAY_CAP] * 3 + [0.0, 0.0]
    # only the best DAY_TOP by the first pass are counted (and support is capped): a
    # candidate below them has the support of its day's best, and adds none to theirs
    best = [Candidate(hits=[hits[0]], prior=1.0) for _ in range(DAY_TOP)]
    below = [Candidate(hits=[hits[n]], prior=0.1) for n in (1, 3)]
    support(below + best)
    assert below[0].day_support == 1.0 and below[1].day_support == 0.0
    assert {c.day_support for c in best} == {1.0}


def test_a_question_the_user_asked_ranks_below_what_they_said(
        log: RelationalStore, memory: MemoryStore, clock: Clock) -> None:
    clock.now = DAY
    engine = standard_engine(log, ScriptedModel(["Nice.", "Sure."]), recall=False, clock=clock)
    first = engine.run_turn("Which music do you play at your jazz gigs?", user_id="ann")
    engine.run_turn("I play jazz piano at gigs in town.", user_id="ann",
                    conversation_id=first.conversation_id)
    MemoryWriter(log, memory).run()
    question = "What music does Ann play at jazz gigs?"

    def ranked(recall: MemoryRecall) -> list[str]:
        return [m.entry.text for m in recall.recall("ann", question, ignore=["Ann"]).memories]

    # by its words the question covers all of the query, the statement less: first without
    # the model; a model that counts asking against a turn puts the statement first
    before = ranked(MemoryRecall(memory, steps=replace(ALL, learned=False)))
    assert before[0].startswith("Which music")
    assert ranked(MemoryRecall(memory, model=_model(coverage=1.0, asking=-2.0)))[0] == \
        "I play jazz piano at gigs in town."
    assert ranked(MemoryRecall(memory))[0] == "I play jazz piano at gigs in town."


def test_the_model_ranks_but_never_decides_abstention(
        memory: MemoryStore, clock: Clock) -> None:
    for n, text in enumerate(["I adopted a greyhound called Pepper",
                              "My sister lives in Bergen", "I paint watercolours on Sundays"]):
        clock.now = DAY + timedelta(days=n)
        memory.add("ann", NewMemory(text))
    learned, before = MemoryRecall(memory), MemoryRecall(memory,
                                                        steps=replace(ALL, learned=False))
    for question in ("What is the name of my greyhound?", "Where does my sister live?",
                     "What did I realize at my marathon?"):
        one, other = learned.recall("ann", question), before.recall("ann", question)
        assert one.abstained == other.abstained
        assert {m.entry.id for m in one.memories} == {m.entry.id for m in other.memories}
    assert learned.recall("ann", "What did I realize at my marathon?").abstained
    # the score shown is the model's probability (trust-weighted): between 0 and 1
    assert all(0 < m.score < 1 for m in learned.recall("ann", "Where does my sister "
                                                       "live?").memories)


def test_an_untrusted_candidate_counts_half_under_the_model(memory: MemoryStore) -> None:
    memory.add("ann", NewMemory("My sister lives in Bergen"))
    memory.add("ann", NewMemory("My sister lives in Bergen", source=Source.TOOL_RETURNED))
    candidates = MemoryRecall(memory).scored("ann", "Where does my sister live?").candidates
    assert sorted(c.trusted for c in candidates) == [False, True]
    for c in candidates:
        probability = LEXICAL_MODEL.probability(c.features())
        assert c.score == pytest.approx(probability * (1.0 if c.trusted else 0.5))
