"""Dense retrieval with the shipped MiniLM model, fused with BM25 by reciprocal rank."""

from __future__ import annotations

import os

import pytest

from threadline.retrieval.corpus import Corpus, Document, fuse
from threadline.stores.sqlite import SQLiteStore


def require_dense() -> None:
    """Skip without the dense extra, except where the suite promises it (scripts/test)."""
    if os.environ.get("THREADLINE_REQUIRE_LOCAL_MODEL") == "1":
        import sentence_transformers  # noqa: F401
    else:
        pytest.importorskip("sentence_transformers", reason="install the dense extra")


def test_reciprocal_rank_fusion_rewards_agreement_and_breaks_ties_by_id() -> None:
    assert fuse([["a", "b"], ["b", "c"]]) == ["b", "a", "c"]  # b is in both
    assert fuse([["x"], ["y"]]) == ["x", "y"]  # the same score: by id
    assert fuse([["b", "a"]]) == ["b", "a"]  # one ranking keeps its order


@pytest.fixture(scope="module")
def dense_corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    require_dense()
    store = SQLiteStore(tmp_path_factory.mktemp("dense") / "t.db")
    corpora = Corpus(store)
    corpora.add("notes", [
        Document("cloud.md", "Company Y's cloud business grew strongly, with revenue of "
                             "$12.4 billion in FY2025."),
        Document("office.md", "The company moved its headquarters to a new office building "
                              "downtown."),
        Document("hiring.md", "Engineering headcount doubled as the team hired many new "
                              "developers."),
    ], dense=True)
    return corpora


def test_a_dense_corpus_finds_meaning_without_shared_words(dense_corpus: Corpus) -> None:
    assert dense_corpus.dense("notes")
    found = dense_corpus.search("notes", "recruiting programmers", limit=3)
    assert found[0].source == "hiring.md"  # no word in common with the query
    again = dense_corpus.search("notes", "recruiting programmers", limit=3)
    assert [p.chunk_id for p in again] == [p.chunk_id for p in found]
    lexical_hit = dense_corpus.search("notes", "cloud revenue FY2025", limit=1)
    assert lexical_hit[0].source == "cloud.md"
