"""The CorpusBackend contract, as tests any store that keeps corpora runs.

Mix :class:`CorpusConformance` into a store's conformance test class (it uses the same
``make_store`` fixture as :class:`~threadline.stores.conformance.StoreConformance`)::

    class TestMyStore(StoreConformance, CorpusConformance):
        ...

The tests speak to ``store.corpora`` directly, in stored records: chunking, fusion and the
saved answers' keys are tested with ``threadline.retrieval``.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from threadline.errors import UnknownCorpus
from threadline.items import format_time
from threadline.stores.base import Store
from threadline.stores.conformance import OpensStore
from threadline.stores.corpus import (
    CorpusBackend,
    CorpusInfo,
    NewAnswer,
    Passage,
    StoredAnswer,
    StoredChunk,
    StoredDocument,
)

_T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _document(doc_id: str, *texts: str, source: str | None = None,
              vectors: tuple[bytes, ...] = ()) -> StoredDocument:
    """A document with one chunk per text (one sentence each), ids ``DOC:cN``."""
    chunks = tuple(StoredChunk(f"{doc_id}:c{n}", text, ((f"{doc_id}:c{n}:s1", text),),
                               vectors[n - 1] if vectors else None)
                   for n, text in enumerate(texts, start=1))
    return StoredDocument(doc_id, source or f"{doc_id}.md", sum(len(t) for t in texts), chunks)


def _answer(corpus: str, text: str, *, query: str = "q", anchors: str = "[]",
            passages: str = '["d1:c1"]', vector: bytes | None = None) -> NewAnswer:
    return NewAnswer(corpus, query, anchors, passages, text, "c_1", 2, f"call_{text}", vector,
                     _T0)


class CorpusConformance(OpensStore):
    """The behaviour every store that keeps corpora must show."""

    @pytest.fixture
    def corpora(self, store: Store) -> CorpusBackend:
        backend = store.corpora
        assert backend is not None, "this store keeps no corpora: leave CorpusConformance out"
        return backend

    def test_corpora_are_added_listed_and_removed(self, corpora: CorpusBackend) -> None:
        assert corpora.corpora() == [] and not corpora.exists("filings")
        assert corpora.add("filings", [_document("d2", "Cloud revenue grew.", "It was up."),
                                       _document("d1", "Company Z grew slower.")],
                           at=_T0) == set()
        corpora.add("archive", [_document("d1", "Company Z grew slower.")], at=_T0)
        corpora.add("empty", [], at=_T0)  # created with nothing in it
        when = format_time(_T0)
        assert corpora.corpora() == [CorpusInfo("archive", 1, 1, 22, when),
                                     CorpusInfo("empty", 0, 0, 0, when),
                                     CorpusInfo("filings", 2, 3, 51, when)]
        assert corpora.exists("filings") and corpora.document_ids("filings") == {"d1", "d2"}
        corpora.remove("filings")
        assert not corpora.exists("filings") and corpora.document_ids("filings") == set()
        assert corpora.lexical("filings", [["grew"]], 10) == []
        assert corpora.passages("filings", ["d1:c1"]) == []
        assert [c.name for c in corpora.corpora()] == ["archive", "empty"]
        assert corpora.lexical("archive", [["grew"]], 10) == ["d1:c1"]  # the other is intact
        with pytest.raises(UnknownCorpus):
            corpora.remove("filings")

    def test_a_document_the_corpus_has_is_skipped(self, corpora: CorpusBackend) -> None:
        corpora.add("filings", [_document("d1", "Cloud revenue grew.", source="y.md")], at=_T0)
        skipped = corpora.add("filings", [_document("d1", "Cloud revenue grew.", source="copy.md"),
                                          _document("d2", "Company Z grew slower."),
                                          _document("d2", "Company Z grew slower.")], at=_T0)
        assert skipped == {"d1", "d2"}  # d2's second copy is already there when it comes
        assert corpora.document_ids("filings") == {"d1", "d2"}
        assert [(c.documents, c.chunks) for c in corpora.corpora()] == [(2, 2)]
        assert [p.source for p in corpora.passages("filings", ["d1:c1"])] == ["y.md"]

    def test_an_add_is_all_or_nothing(self, corpora: CorpusBackend) -> None:
        clash = StoredDocument("d2", "z.md", 5, (StoredChunk("d1:c1", "clash", ()),))
        with pytest.raises(Exception):  # noqa: B017 - whichever error the database raises
            corpora.add("filings", [_document("d1", "Cloud revenue grew."), clash], at=_T0)
        assert corpora.corpora() == [] and not corpora.exists("filings")
        corpora.add("filings", [_document("d1", "Cloud revenue grew.")], at=_T0)
        assert corpora.lexical("filings", [["cloud"]], 10) == ["d1:c1"]

    def test_lexical_search_is_deterministic_with_ties_by_chunk_id(
            self, corpora: CorpusBackend) -> None:
        same = "Cloud revenue grew in FY2025."
        corpora.add("filings", [_document("d3", same), _document("d1", same),
                                _document("d2", same, "Nothing to see here."),
                                _document("d4", "Revenue from the cloud fell.")], at=_T0)
        corpora.add("other", [_document("d0", same)], at=_T0)
        # the same text ranks the same: by chunk id; only this corpus
        assert corpora.lexical("filings", [["cloud", "revenue"]], 10) == [
            "d1:c1", "d2:c1", "d3:c1"]  # a phrase: its words in order, side by side
        assert corpora.lexical("filings", [["cloud", "revenue"]], 2) == ["d1:c1", "d2:c1"]
        found = corpora.lexical("filings", [["fell"], ["fy2025"]], 10)  # any of the phrases
        assert sorted(found) == ["d1:c1", "d2:c1", "d3:c1", "d4:c1"]
        assert found == corpora.lexical("filings", [["fell"], ["fy2025"]], 10)
        assert corpora.lexical("filings", [["see"]], 10) == ["d2:c2"]
        assert corpora.lexical("filings", [["missing"]], 10) == []

    def test_query_words_are_never_operators(self, corpora: CorpusBackend) -> None:
        corpora.add("notes", [_document("d1", "Cats and dogs or birds, not fish."),
                              _document("d2", "Fish near the river.")], at=_T0)
        for word in ("and", "or", "not", "near"):
            found = corpora.lexical("notes", [[word]], 10)
            assert found == (["d2:c1"] if word == "near" else ["d1:c1"]), word
        assert corpora.lexical("notes", [['fish"'], ["river's"], ["back\\slash"]], 10) != []

    def test_passages_come_in_the_order_asked(self, corpora: CorpusBackend) -> None:
        doc = StoredDocument("d1", "report.md", 40, (
            StoredChunk("d1:c1", "First part. Still first.",
                        (("d1:c1:s1", "First part."), ("d1:c1:s2", "Still first."))),
            StoredChunk("d1:c2", "Second — ünïcode.", (("d1:c2:s1", "Second — ünïcode."),))))
        corpora.add("filings", [doc], at=_T0)
        assert corpora.passages("filings", ["d1:c2", "d9:c1", "d1:c1"]) == [
            Passage("d1:c2", "report.md", "Second — ünïcode.",
                    (("d1:c2:s1", "Second — ünïcode."),)),
            Passage("d1:c1", "report.md", "First part. Still first.",
                    (("d1:c1:s1", "First part."), ("d1:c1:s2", "Still first.")))]
        assert corpora.passages("filings", []) == []
        assert corpora.passages("other", ["d1:c1"]) == []

    def test_vectors_are_kept_per_chunk_and_go_with_the_corpus(
            self, corpora: CorpusBackend) -> None:
        corpora.add("plain", [_document("d1", "Cloud revenue grew.")], at=_T0)
        assert not corpora.dense("plain") and corpora.vectors("plain") == []
        vectors = (b"\x00\x01" * 4, b"\xff" * 8)
        corpora.add("dense", [_document("d1", "Cloud revenue grew.", "It was up.",
                                        vectors=vectors)], at=_T0, model="m")
        assert corpora.dense("dense") and not corpora.dense("plain")
        assert sorted(corpora.vectors("dense")) == [("d1:c1", vectors[0]),
                                                    ("d1:c2", vectors[1])]
        corpora.remove("dense")
        assert not corpora.dense("dense") and corpora.vectors("dense") == []

    def test_answers_are_found_exactly_or_by_anchors_and_passages(
            self, corpora: CorpusBackend) -> None:
        for name in ("filings", "other"):
            corpora.add(name, [_document("d1", "Cloud revenue grew.")], at=_T0)
        saved = [_answer("filings", "a1", query="q1", anchors="A", vector=b"\x01" * 8),
                 _answer("filings", "a2", query="q1", anchors="A"),  # newest exact, no vector
                 _answer("filings", "a3", query="q2", anchors="A", vector=b"\x03" * 8),
                 _answer("filings", "a4", query="q3", anchors="B", vector=b"\x04" * 8),
                 _answer("filings", "a5", query="q1", anchors="A", passages='["d1:c2"]',
                         vector=b"\x05" * 8),
                 _answer("other", "a6", query="q1", anchors="A", vector=b"\x06" * 8)]
        for answer in saved:
            corpora.save_answer(answer)
        exact = corpora.exact_answer("filings", "q1", '["d1:c1"]')
        assert exact is not None
        assert (exact.answer, exact.conversation_id, exact.reply_seq, exact.call_id,
                exact.vector) == ("a2", "c_1", 2, "call_a2", None)
        found = corpora.exact_answer("filings", "q1", '["d1:c2"]')
        assert found is not None and found.answer == "a5"
        assert corpora.exact_answer("filings", "q9", '["d1:c1"]') is None
        similar = corpora.answers_by_anchors("filings", "A", '["d1:c1"]')
        assert [(a.answer, a.vector) for a in similar] == [("a1", b"\x01" * 8),
                                                          ("a3", b"\x03" * 8)]
        assert similar[0].id < similar[1].id and all(isinstance(a, StoredAnswer)
                                                     for a in similar)
        assert corpora.answers_by_anchors("filings", "C", '["d1:c1"]') == []
        corpora.remove("filings")  # its answers go with it
        corpora.add("filings", [_document("d1", "Cloud revenue grew.")], at=_T0)
        assert corpora.exact_answer("filings", "q1", '["d1:c1"]') is None
        other = corpora.exact_answer("other", "q1", '["d1:c1"]')
        assert other is not None and other.answer == "a6"
