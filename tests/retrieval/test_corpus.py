"""The corpus: stable chunk ids, deterministic search, and turns that answer from it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from threadline.errors import InputError, UnknownCorpus
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.providers.retrieval import CorpusSearch
from threadline.retrieval.chunks import chunk, sentences
from threadline.retrieval.corpus import Corpus, Document
from threadline.standard import standard_engine
from threadline.stores.base import Store
from threadline.stores.relational import RelationalStore
from threadline.stores.sqlite import SQLiteStore

REPORT = """# Company Y annual report FY2025

Company Y reported cloud revenue of $12.4 billion in FY2025, up 18% from $10.5 billion in FY2024.
ITEM 1B describes unresolved staff comments. ITEM 7 discusses the drivers of cloud growth.

Competitors such as Company Z reported slower cloud growth of 9% in FY2025."""
OTHER = "Company Z grew cloud revenue by 9 percent in FY2025 and 12 percent in FY2024."


FILINGS = CorpusSearch("filings")


def test_chunks_have_stable_ids_and_whole_sentences() -> None:
    first, again = chunk(REPORT), chunk("\n" + REPORT + "\n")
    assert [c.id for c in first] == [c.id for c in again]  # the same text, the same ids
    assert first[1].sentences[0].id == f"{first[1].doc_id}:c2:s1"
    assert "$12.4 billion" in first[1].text and "$10.5 billion" in first[1].text
    assert sentences("It cost $3.5m, e.g. for tests. Then more!") == [
        "It cost $3.5m, e.g. for tests.", "Then more!"]
    long = chunk(" ".join(f"Sentence number {n} is here." for n in range(200)), size=300)
    assert all(len(c.text) <= 300 for c in long) and len(long) > 10


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, store: SQLiteStore) -> Iterator[Store]:
    """Corpora live in either store: each test here runs on both."""
    if request.param == "sqlite":
        yield store
        return
    from threadline.stores.postgres import PostgresStore

    postgres = PostgresStore(request.getfixturevalue("postgres_url"))
    yield postgres
    postgres.close()


@pytest.fixture
def corpus(any_store: RelationalStore) -> Corpus:
    corpora = Corpus(any_store)
    corpora.add("filings", [Document("y.md", REPORT), Document("z.txt", OTHER)])
    return corpora


def test_search_is_deterministic_and_refuses_what_it_cannot_search(corpus: Corpus) -> None:
    found = corpus.search("filings", "cloud revenue FY2024", limit=3)
    assert found == corpus.search("filings", "cloud revenue FY2024", limit=3)
    assert {p.source for p in found} == {"y.md", "z.txt"}
    again = corpus.add("filings", [Document("copy.md", REPORT)])
    assert again.documents == 0 and again.unchanged == ["copy.md"]
    assert [c.documents for c in corpus.corpora()] == [2]
    with pytest.raises(InputError, match="no words to search for"):
        corpus.search("filings", "what was it and how did they?")
    with pytest.raises(UnknownCorpus):
        corpus.search("nope", "cloud")
    corpus.remove("filings")
    assert corpus.corpora() == []


def test_a_follow_up_searches_with_its_nouns_back_and_the_log_keeps_what_was_shown(
        any_store: RelationalStore, corpus: Corpus) -> None:
    store = any_store
    model = ScriptedModel()
    engine = standard_engine(store, model, corpora=corpus)
    first = engine.run_turn("What was Company Y's cloud revenue in FY2025?", options=[FILINGS])
    follow = engine.run_turn("And the year before?", conversation_id=first.conversation_id,
                             options=[FILINGS])
    history = store.history(first.conversation_id)
    assert [i.kind for i in history] == [ItemKind.USER, ItemKind.RETRIEVAL, ItemKind.ASSISTANT,
                                         ItemKind.USER, ItemKind.RETRIEVAL, ItemKind.ASSISTANT]
    retrieval = history[4].content
    assert retrieval["raw"] == "And the year before?" and retrieval["winner"] == "deterministic"
    assert "Company Y" in retrieval["query"] and "FY2024" in retrieval["query"]
    assert retrieval["passages"] and all(p["text"] for p in retrieval["passages"])
    shown = model.requests[-1].openai_messages()
    tail = shown[-2]["content"]
    assert "retrieved passages" in tail and retrieval["passages"][0]["id"] in tail
    # the passages sit in the current turn only: the history the next call re-sends is the
    # conversation itself, so the cached prefix holds
    assert all("retrieved passages" not in m["content"] for m in shown[:-2])
    assert follow.reply.seq == 6
    with pytest.raises(InputError, match="no words to search for"):
        engine.run_turn("the of and", options=[FILINGS])
    with pytest.raises(UnknownCorpus):
        engine.run_turn("cloud revenue?", options=[CorpusSearch("nope")])
    assert len(store.conversations()) == 1  # the refused questions wrote nothing
