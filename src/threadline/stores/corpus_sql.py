"""Corpora and saved answers over SQL, shared by the SQLite and PostgreSQL stores.

The :class:`~threadline.stores.corpus.CorpusBackend` written once, in the SQL both databases
understand; only the full-text search statement and its query syntax come from the backend
(``stores/fulltext.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from threadline.errors import UnknownCorpus
from threadline.items import format_time
from threadline.stores.corpus import (
    CorpusInfo,
    NewAnswer,
    Passage,
    StoredAnswer,
    StoredDocument,
)
from threadline.stores.fulltext import FullText, Phrases
from threadline.stores.sessions import Database, Session

_ANSWER_COLUMNS = "id, answer, conversation_id, reply_seq, call_id, vector"


class SQLCorpora:
    """Corpora in the tables of the ``*_corpus`` migrations."""

    def __init__(self, db: Database, fulltext: FullText) -> None:
        self._db, self._fulltext = db, fulltext

    def add(self, corpus: str, documents: Sequence[StoredDocument], *, at: datetime,
            model: str | None = None) -> set[str]:
        now = format_time(at)
        skipped: set[str] = set()
        with self._db.transaction() as db:
            db.run("INSERT INTO corpora (name, created_at) VALUES (?, ?) "
                   "ON CONFLICT (name) DO NOTHING", (corpus, now))
            for document in documents:
                if db.one("SELECT 1 FROM corpus_documents WHERE corpus = ? AND doc_id = ?",
                          (corpus, document.doc_id)):
                    skipped.add(document.doc_id)
                    continue
                db.run("INSERT INTO corpus_documents (corpus, doc_id, source, bytes, added_at)"
                       " VALUES (?, ?, ?, ?, ?)",
                       (corpus, document.doc_id, document.source, document.bytes, now))
                for piece in document.chunks:
                    db.run("INSERT INTO corpus_chunks (corpus, doc_id, chunk_id, sentences, "
                           "text) VALUES (?, ?, ?, ?, ?)",
                           (corpus, document.doc_id, piece.chunk_id,
                            json.dumps([list(s) for s in piece.sentences], ensure_ascii=False),
                            piece.text))
                    if piece.vector is not None:
                        db.run("INSERT INTO corpus_vectors (chunk, model, vector) VALUES ("
                               "(SELECT id FROM corpus_chunks WHERE corpus = ? AND "
                               "chunk_id = ?), ?, ?)",
                               (corpus, piece.chunk_id, model, piece.vector))
        return skipped

    def document_ids(self, corpus: str) -> set[str]:
        with self._db.reading() as db:
            return {r[0] for r in db.all("SELECT doc_id FROM corpus_documents WHERE corpus = ?",
                                         (corpus,))}

    def corpora(self) -> list[CorpusInfo]:
        with self._db.reading() as db:
            rows = db.all(
                "SELECT c.name, c.created_at,"
                " (SELECT count(*) FROM corpus_documents d WHERE d.corpus = c.name),"
                " (SELECT count(*) FROM corpus_chunks k WHERE k.corpus = c.name),"
                " (SELECT coalesce(sum(bytes), 0) FROM corpus_documents d"
                "  WHERE d.corpus = c.name) FROM corpora c ORDER BY c.name")
        return [CorpusInfo(r[0], r[2], r[3], int(r[4]),
                           r[1] if isinstance(r[1], str) else format_time(r[1])) for r in rows]

    def exists(self, corpus: str) -> bool:
        with self._db.reading() as db:
            return _exists(db, corpus)

    def remove(self, corpus: str) -> None:
        with self._db.transaction() as db:
            if not _exists(db, corpus):
                raise UnknownCorpus(corpus)
            db.run("DELETE FROM corpus_chunks WHERE corpus = ?", (corpus,))
            db.run("DELETE FROM corpora WHERE name = ?", (corpus,))

    def lexical(self, corpus: str, phrases: Phrases, limit: int) -> list[str]:
        with self._db.reading() as db:
            return [r[0] for r in db.all(self._fulltext.corpus_search,
                                         (self._fulltext.query(phrases), corpus, limit))]

    def vectors(self, corpus: str) -> list[tuple[str, bytes]]:
        with self._db.reading() as db:
            return [(r[0], r[1]) for r in db.all(
                "SELECT k.chunk_id, v.vector FROM corpus_vectors v JOIN corpus_chunks k"
                " ON k.id = v.chunk WHERE k.corpus = ?", (corpus,))]

    def dense(self, corpus: str) -> bool:
        with self._db.reading() as db:
            return db.one("SELECT 1 FROM corpus_vectors v JOIN corpus_chunks k ON"
                          " k.id = v.chunk WHERE k.corpus = ? LIMIT 1", (corpus,)) is not None

    def passages(self, corpus: str, chunk_ids: Sequence[str]) -> list[Passage]:
        if not chunk_ids:
            return []
        with self._db.reading() as db:
            rows = {r[0]: r for r in db.all(
                "SELECT k.chunk_id, d.source, k.text, k.sentences FROM corpus_chunks k"
                " JOIN corpus_documents d ON d.corpus = k.corpus AND d.doc_id = k.doc_id"
                f" WHERE k.corpus = ? AND k.chunk_id IN ({','.join('?' * len(chunk_ids))})",
                (corpus, *chunk_ids))}
        return [Passage(r[0], r[1], r[2], tuple((s, t) for s, t in json.loads(r[3])))
                for r in (rows[c] for c in chunk_ids if c in rows)]

    # -- saved answers ----------------------------------------------------------------

    def save_answer(self, answer: NewAnswer) -> None:
        with self._db.transaction() as db:
            db.run("INSERT INTO answer_cache (corpus, query_key, anchors, passages, answer,"
                   " conversation_id, reply_seq, call_id, vector, created_at)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (answer.corpus, answer.query_key, answer.anchors, answer.passages,
                    answer.answer, answer.conversation_id, answer.reply_seq, answer.call_id,
                    answer.vector, format_time(answer.created_at)))

    def exact_answer(self, corpus: str, query_key: str, passages: str) -> StoredAnswer | None:
        with self._db.reading() as db:
            row = db.one(f"SELECT {_ANSWER_COLUMNS} FROM answer_cache WHERE corpus = ? AND "
                         "query_key = ? AND passages = ? ORDER BY id DESC LIMIT 1",
                         (corpus, query_key, passages))
        return None if row is None else StoredAnswer(*row)

    def answers_by_anchors(self, corpus: str, anchors: str,
                           passages: str) -> list[StoredAnswer]:
        with self._db.reading() as db:
            rows = db.all(f"SELECT {_ANSWER_COLUMNS} FROM answer_cache WHERE corpus = ? AND "
                          "anchors = ? AND passages = ? AND vector IS NOT NULL ORDER BY id",
                          (corpus, anchors, passages))
        return [StoredAnswer(*row) for row in rows]


def _exists(db: Session, corpus: str) -> bool:
    return db.one("SELECT 1 FROM corpora WHERE name = ?", (corpus,)) is not None
