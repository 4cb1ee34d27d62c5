"""Recall on both stores: only the user's current entries, a small k, trust-weighted, with
provenance, abstaining when nothing bears on the message; and the turn that shows it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.memory.conftest import T0, Clock
from threadline.engine import Engine
from threadline.items import ItemKind
from threadline.memory import MemoryStore, NewMemory, Source
from threadline.memory.recall import MemoryRecall, query_terms
from threadline.models.scripted import ScriptedModel
from threadline.providers.retrieval import CorpusSearch
from threadline.request import SegmentKind
from threadline.standard import standard_engine
from threadline.stores.relational import RelationalStore
from threadline.stores.sqlite import SQLiteStore


def _texts(recall: MemoryRecall, user: str, query: str, **kw: object) -> list[str]:
    return [m.entry.text for m in recall.recall(user, query, **kw).memories]  # type: ignore[arg-type]


def test_recall_finds_the_users_entries_that_bear_on_the_query(memory: MemoryStore) -> None:
    for text in ("I went to an LGBTQ support group yesterday", "My daughter is called Mia",
                 "I painted a sunrise over the lake", "I prefer metric units"):
        memory.add("ann", NewMemory(text))
    memory.add("bob", NewMemory("I joined a support group for painters"))
    recall = MemoryRecall(memory)
    assert _texts(recall, "ann", "When did Ann go to the LGBTQ support group?",
                  ignore=["Ann"]) == ["I went to an LGBTQ support group yesterday"]
    assert _texts(recall, "ann", "what did I paint?") == ["I painted a sunrise over the lake"]
    # bob's entry matches the words, but the query names ann in its key
    assert _texts(recall, "ann", "painters workshop") == []
    assert _texts(recall, "bob", "painters workshop") == [
        "I joined a support group for painters"]


def test_a_question_about_something_never_said_recalls_nothing(memory: MemoryStore) -> None:
    memory.add("ann", NewMemory("I watched a horse race on Sunday"))
    memory.add("ann", NewMemory("I realized I need more sleep"))
    strict = MemoryRecall(memory, threshold=0.5)
    found = strict.recall("ann", "What did Ann realize after her charity race?", ignore=["Ann"])
    # the nearest entries share a word of three, not the question: under a strict threshold
    assert found.abstained and found.memories == ()
    assert found.render() == "nothing remembered about the user bears on this message"
    # the default (tuned for recall on LoCoMo's dev split) shows a third of the words; with
    # no word in common nothing bears on the question at all, however the candidates rank
    assert not MemoryRecall(memory).recall("ann", "What did Ann realize after her charity "
                                                  "race?", ignore=["Ann"]).abstained
    assert MemoryRecall(memory).recall("ann", "Which opera did Ann see in Vienna?",
                                       ignore=["Ann"]).abstained


def test_only_current_entries_come_back(memory: MemoryStore, clock: Clock) -> None:
    old = memory.add("ann", NewMemory("I live in Oslo"))
    clock.now = T0 + timedelta(days=1)
    memory.update("ann", old.id, NewMemory("I live in Bergen now"))
    trip = memory.add("ann", NewMemory("I am flying to Singapore in July",
                                       valid_to=datetime(2026, 8, 1, tzinfo=UTC)))
    memory.add("ann", NewMemory("I live next to a bakery", expires_at=T0 + timedelta(days=2)))
    recall = MemoryRecall(memory)
    assert _texts(recall, "ann", "where do I live?") == ["I live in Bergen now",
                                                         "I live next to a bakery"] or \
        _texts(recall, "ann", "where do I live?") == ["I live next to a bakery",
                                                      "I live in Bergen now"]
    clock.now = T0 + timedelta(days=3)  # the bakery entry expired
    assert _texts(recall, "ann", "where do I live?") == ["I live in Bergen now"]
    assert _texts(recall, "ann", "Singapore trip in July") == [trip.text]
    clock.now = datetime(2026, 8, 2, tzinfo=UTC)  # July is over: the trip is past
    assert _texts(recall, "ann", "Singapore trip in July") == []
    # the old value is history, never recalled as current
    assert all(m.entry.id != old.id for m in recall.recall("ann", "Oslo").memories)


def test_untrusted_entries_need_to_cover_more(memory: MemoryStore) -> None:
    memory.add("ann", NewMemory("I like jazz and blues", source=Source.USER_STATED))
    memory.add("ann", NewMemory("Ann likes techno and opera", source=Source.TOOL_RETURNED))
    recall = MemoryRecall(memory, threshold=0.5)
    found = recall.recall("ann", "jazz or techno concerts")  # each covers a third
    assert found.memories == ()
    both = recall.recall("ann", "jazz techno")  # each covers half: the untrusted a quarter
    assert [m.entry.text for m in both.memories] == ["I like jazz and blues"]
    lenient = MemoryRecall(memory, threshold=0.25).recall("ann", "jazz techno")
    assert [m.entry.text for m in lenient.memories] == ["I like jazz and blues",
                                                        "Ann likes techno and opera"]
    # the same features, the untrusted one's score halved (its full-text rank may be the
    # better one: the two tie on words, and ties go by id)
    assert 0 < lenient.memories[1].score < lenient.memories[0].score * 0.6


def test_k_is_small_and_best_first(memory: MemoryStore) -> None:
    for i in range(8):
        memory.add("ann", NewMemory(f"I keep notebook number {i} in the garden shed"))
    memory.add("ann", NewMemory("I keep my bike in the garden"))
    recall = MemoryRecall(memory, k=3)
    found = recall.recall("ann", "what do I keep in the garden shed?")
    assert len(found.memories) == 3
    assert all("shed" in m.entry.text for m in found.memories)
    assert [m.score for m in found.memories] == sorted((m.score for m in found.memories),
                                                       reverse=True)


def test_deleted_and_forgotten_entries_leave_nothing_to_find(memory: MemoryStore,
                                                             log: RelationalStore) -> None:
    entry = memory.add("ann", NewMemory("I live in Oslo"))
    memory.add("ann", NewMemory("My cat is called Oslo"))
    recall = MemoryRecall(memory)
    memory.delete("ann", entry.id)
    assert _texts(recall, "ann", "Oslo") == ["My cat is called Oslo"]
    memory.forget("ann")
    assert _texts(recall, "ann", "Oslo") == []
    if isinstance(log, SQLiteStore):  # the index holds no tokens of what was deleted
        with log._session() as db:
            assert db.one("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH 'oslo'")[0] \
                == 0


def test_query_terms_drop_stopwords_names_and_possessives() -> None:
    assert query_terms("When did Caroline go to Melanie's pottery class?",
                       ignore=["Caroline"]) == ("melanie", "pottery", "class")


def test_a_turn_shows_recalled_memories_in_its_tail_with_provenance(
        memory: MemoryStore, log: RelationalStore) -> None:
    first = Engine(log, ScriptedModel()).run_turn("I'm vegetarian.")
    memory.add("ann", NewMemory("I am vegetarian and allergic to peanuts",
                                conversation_id=first.conversation_id,
                                item_seqs=(first.message.seq,)))
    engine = standard_engine(log, ScriptedModel(), recall=MemoryRecall(memory))
    turn = engine.run_turn("Which dinner is fine for a vegetarian allergic to peanuts?",
                           user_id="ann", client_msg_id="m1")
    history = log.history(turn.conversation_id)
    recalled = [i for i in history if i.kind is ItemKind.RECALL]
    assert len(recalled) == 1 and recalled[0].parent_seq == turn.message.seq
    assert recalled[0].content["memories"][0]["conversation_id"] == first.conversation_id
    sent = log.call(turn.call.id).request
    assert sent is not None
    tail = sent.messages[-2]["content"]
    assert 'the user said on 3 May 2026: "I am vegetarian and allergic to peanuts"' in tail
    request = engine.request_for(turn.conversation_id)
    assert request.segment(SegmentKind.HISTORY) is not None
    # a retry of the same message records nothing new
    again = engine.run_turn("Which dinner is fine for a vegetarian allergic to peanuts?",
                            user_id="ann",
                            conversation_id=turn.conversation_id, client_msg_id="m1")
    assert again.deduplicated
    assert len([i for i in log.history(turn.conversation_id)
                if i.kind is ItemKind.RECALL]) == 1
    # with nothing that bears on it, the tail says so
    other = engine.run_turn("What is the capital of Peru?", user_id="ann",
                            conversation_id=turn.conversation_id)
    sent = log.call(other.call.id).request
    assert sent is not None
    assert "nothing remembered about the user bears on this message" in \
        sent.messages[-2]["content"]
    # another user's turn recalls none of ann's memories
    bob = engine.run_turn("Which dinner is fine for a vegetarian allergic to peanuts?",
                          user_id="bob")
    content = [i for i in log.history(bob.conversation_id)
               if i.kind is ItemKind.RECALL][0].content
    assert content["memories"] == []


def test_a_turn_that_searched_a_corpus_recalls_with_the_same_standalone_query(
        memory: MemoryStore, log: RelationalStore) -> None:
    from threadline.retrieval.corpus import Corpus, Document

    corpora = Corpus(log)
    corpora.add("notes", [Document("trip.md", "The Singapore trip is booked for July.")])
    memory.add("ann", NewMemory("I am flying to Singapore in July with my sister"))
    engine = standard_engine(log, ScriptedModel(), corpora=corpora, recall=MemoryRecall(memory))
    turn = engine.run_turn("When is the Singapore trip?", options=[CorpusSearch("notes")],
                           user_id="ann")
    history = log.history(turn.conversation_id)
    [retrieved] = [i for i in history if i.kind is ItemKind.RETRIEVAL]
    [recalled] = [i for i in history if i.kind is ItemKind.RECALL]
    assert recalled.content["query"] == retrieved.content["query"]  # rewritten once
    assert [m["text"] for m in recalled.content["memories"]] == [
        "I am flying to Singapore in July with my sister"]
