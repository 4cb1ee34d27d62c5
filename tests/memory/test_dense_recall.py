"""Dense recall on both stores: embeddings beside the entries, named by the same key, deleted
with them; a partial word match that a paraphrase completes is recalled."""

from __future__ import annotations

import pytest

from tests.retrieval.test_dense import require_dense
from threadline.memory import MemoryKind, MemoryStore, NewMemory
from threadline.memory.context import CONTEXT_CHARS
from threadline.memory.dense import MemoryVectors
from threadline.memory.recall import MemoryRecall
from threadline.memory.writer import MemoryWriter
from threadline.models.scripted import ScriptedModel
from threadline.retrieval.dense import Embedder
from threadline.standard import standard_engine
from threadline.stores.relational import RelationalStore

ENTRIES = ("My daughter is at university studying to become a doctor",
           "I adopted two cats from the shelter", "I go running by the river every morning",
           "My brother plays bass in a jazz band")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    require_dense()
    return Embedder()


def _texts(recall: MemoryRecall, user: str, query: str) -> list[str]:
    return [m.entry.text for m in recall.recall(user, query).memories]


def test_a_paraphrase_completes_a_partial_match(memory: MemoryStore,
                                                embedder: Embedder) -> None:
    for text in ENTRIES:
        memory.add("ann", NewMemory(text))
    memory.add("bob", NewMemory("My daughter is training to become a pilot"))
    lexical = MemoryRecall(memory)
    dense = MemoryRecall(memory, dense=MemoryVectors(memory, lambda: embedder))
    for question, expected in [("Which profession is my child preparing for?", ENTRIES[0]),
                               ("What animals did I bring home recently?", ENTRIES[1])]:
        assert _texts(lexical, "ann", question) == []  # not one word in common
        # the one that bears on it first; once something does, the rest follow, ranked
        assert _texts(dense, "ann", question)[0] == expected
    # what nobody said stays unrecalled, and bob's entries are never candidates for ann
    assert _texts(dense, "ann", "What is the capital of Peru?") == []
    assert "pilot" not in " ".join(_texts(dense, "ann", "Is my daughter becoming a pilot?"))


def test_vectors_are_kept_beside_entries_and_go_with_them(
        memory: MemoryStore, log: RelationalStore, embedder: Embedder) -> None:
    vectors = MemoryVectors(memory, lambda: embedder)
    engine = standard_engine(log, ScriptedModel(), recall=False)
    first = engine.run_turn("I adopted two cats from the shelter.", user_id="ann")
    MemoryWriter(log, memory, vectors=vectors).run()  # the writer embeds what it learned
    assert vectors.embed_missing("ann") == 0  # the fact and the turn it was said in
    memory.add("ann", NewMemory("I go running by the river every morning"))
    assert vectors.embed_missing("ann") == 1 and vectors.embed_missing("ann") == 0
    with log._session() as db:
        assert db.one("SELECT count(*) FROM memory_vectors WHERE user_id = ?",
                      ("ann",))[0] == 3
    log.delete_conversation(first.conversation_id)  # what it taught goes, vector and all
    memory.forget("ann")
    with log._session() as db:
        assert db.one("SELECT count(*) FROM memory_vectors")[0] == 0


def _rows(log: RelationalStore, user: str, entry_id: str, embedder: Embedder) -> int:
    with log._session() as db:
        vector = db.one("SELECT vector FROM memory_vectors WHERE user_id = ? AND id = ?",
                        (user, entry_id))[0]
    return len(bytes(vector)) // (4 * embedder.dimension)


def test_a_turn_is_embedded_in_the_message_it_answers_too(
        memory: MemoryStore, log: RelationalStore, embedder: Embedder) -> None:
    engine = standard_engine(log, ScriptedModel(
        ["Nice to hear from you.", "Which city did you move to last spring?", "Great."]),
        recall=False)
    first = engine.run_turn("I finally unpacked the last boxes yesterday.", user_id="ann")
    engine.run_turn("Guess what happened this year!", user_id="ann",
                    conversation_id=first.conversation_id)
    engine.run_turn("Lisbon, and I love it there.", user_id="ann",
                    conversation_id=first.conversation_id)
    vectors = MemoryVectors(memory, lambda: embedder)
    MemoryWriter(log, memory, vectors=vectors).run()
    turns = {e.text: e for e in memory.entries("ann") if e.kind is MemoryKind.TURN}
    answer = turns["Lisbon, and I love it there."]
    # the turn before it is the assistant's question, and only a turn's context is read
    assert vectors.contexts("ann", [e.id for e in turns.values()]) == {
        answer.id: "Which city did you move to last spring?",
        turns["Guess what happened this year!"].id: "Nice to hear from you."}
    assert _rows(log, "ann", answer.id, embedder) == 2  # as said, and in its context
    first_turn = turns["I finally unpacked the last boxes yesterday."]
    assert _rows(log, "ann", first_turn.id, embedder) == 1  # nothing said before it
    hand = memory.add("ann", NewMemory("I keep a sourdough starter"))
    vectors.embed_missing("ann")
    assert _rows(log, "ann", hand.id, embedder) == 1  # not a turn: no context
    # the question the turn answers is what makes it bear on this one
    question = "Which city did I move to?"
    assert vectors.similarities("ann", question)[answer.id] > \
        embedder.scores(question, embedder.embed([answer.text]))[0] + 0.1
    # without context, a turn is embedded as said
    memory.forget("bob")
    plain = MemoryVectors(memory, lambda: embedder, context=False)
    said = memory.add("bob", NewMemory("Lisbon, and I love it there.", kind=MemoryKind.TURN,
                                       conversation_id=first.conversation_id,
                                       item_seqs=answer.item_seqs))
    plain.embed_missing("bob")
    assert _rows(log, "bob", said.id, embedder) == 1


def test_a_long_message_before_a_turn_gives_only_its_end(
        memory: MemoryStore, log: RelationalStore, embedder: Embedder) -> None:
    long_reply = "word " * 300 + "So, what is your dog called?"
    engine = standard_engine(log, ScriptedModel([long_reply]), recall=False)
    first = engine.run_turn("Hello!", user_id="ann")
    engine.run_turn("Biscuit, after the colour.", user_id="ann",
                    conversation_id=first.conversation_id)
    vectors = MemoryVectors(memory, lambda: embedder)
    MemoryWriter(log, memory, vectors=vectors).run()
    turn = next(e for e in memory.entries("ann") if e.text.startswith("Biscuit"))
    context = vectors.contexts("ann", [turn.id])[turn.id]
    assert len(context) == CONTEXT_CHARS and context.endswith("what is your dog called?")
    # a turn whose item before is not in the conversation: no context, and no error
    ghost = memory.add("ann", NewMemory("I said something", kind=MemoryKind.TURN,
                                        conversation_id=first.conversation_id,
                                        item_seqs=(999,)))
    assert vectors.contexts("ann", [ghost.id]) == {}
