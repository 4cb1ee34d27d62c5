"""Dense recall on both stores: embeddings beside the entries, named by the same key, deleted
with them; a partial word match that a paraphrase completes is recalled."""

from __future__ import annotations

import pytest

from tests.retrieval.test_dense import require_dense
from threadline.memory import MemoryStore, NewMemory
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
