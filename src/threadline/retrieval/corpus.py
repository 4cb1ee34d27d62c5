"""A user's documents, searchable: the corpus kept beside the log, in the same database.

Documents are chunked with stable ids (``chunks``) and indexed for full text: SQLite FTS5 (BM25,
Unicode tokens, diacritics folded) or a PostgreSQL tsvector (``ts_rank_cd``, the 'simple'
configuration); a corpus added with dense search also keeps each chunk's sentence
embedding (``dense``). A search ranks chunks by BM25 and, where there are embeddings, by
similarity too, and fuses the two rankings by reciprocal rank; ties are broken by chunk id, so
the same query over the same corpus always returns the same passages in the same order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from threadline.errors import InputError, StoreError, UnknownCorpus
from threadline.items import format_time, utc_now
from threadline.retrieval.chunks import chunk, document_id
from threadline.retrieval.dense import Embedder
from threadline.rewrite.anchors import content_words, must_preserve
from threadline.stores.relational import RelationalStore, Session
from threadline.stores.sqlite import SQLiteStore

_CANDIDATES = 50  # each ranking's depth before fusion
_FTS = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS corpus_fts USING fts5(text, content='corpus_chunks', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS corpus_chunks_added AFTER INSERT ON corpus_chunks BEGIN "
    "INSERT INTO corpus_fts (rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER IF NOT EXISTS corpus_chunks_removed AFTER DELETE ON corpus_chunks BEGIN "
    "INSERT INTO corpus_fts (corpus_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
)


@dataclass(frozen=True)
class Document:
    source: str
    text: str


@dataclass(frozen=True)
class Passage:
    chunk_id: str
    source: str
    text: str
    sentences: tuple[tuple[str, str], ...]  # (sentence id, text)

    def to_json(self) -> dict[str, object]:
        return {"id": self.chunk_id, "source": self.source, "text": self.text}


@dataclass(frozen=True)
class CorpusInfo:
    name: str
    documents: int
    chunks: int
    bytes: int
    created_at: str

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "documents": self.documents, "chunks": self.chunks,
                "bytes": self.bytes, "created_at": self.created_at}


@dataclass(frozen=True)
class Added:
    corpus: str
    documents: int
    chunks: int
    unchanged: list[str]  # sources whose text the corpus already had

    def to_json(self) -> dict[str, object]:
        return {"corpus": self.corpus, "documents": self.documents, "chunks": self.chunks,
                "unchanged": self.unchanged}


class Corpus:
    """The corpora of one store. ``embedder`` makes the dense model (it loads in a few
    seconds, so only when a corpus with embeddings is added to or searched)."""

    def __init__(self, store: RelationalStore,
                 embedder: Callable[[], Embedder] | None = None) -> None:
        self.store = store
        self._make_embedder = embedder
        self._embedder: Embedder | None = None
        self._lexical = _FTS5_SEARCH if isinstance(store, SQLiteStore) else _TSVECTOR_SEARCH
        if not isinstance(store, SQLiteStore):
            return  # PostgreSQL: the index is part of the schema (migration 0002)
        try:
            with store.session(write=True) as db:
                for statement in _FTS:
                    db.run(statement)
        except StoreError as err:
            if "fts5" not in str(err).lower():
                raise
            raise StoreError(f"this Python's SQLite cannot index text ({err})",
                             hint="use a Python built with SQLite FTS5") from err

    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = (self._make_embedder or Embedder)()
        return self._embedder

    def add(self, name: str, documents: Iterable[Document], *, dense: bool = False,
            progress: Callable[[int], None] | None = None) -> Added:
        """Add documents to corpus ``name`` (created if new), all in one transaction; with
        ``dense``, with the embedding of every new chunk."""
        _check_name(name)
        embedder = self.embedder() if dense else None
        added = chunks = 0
        unchanged = []
        now = format_time(utc_now())
        with self.store.session(write=True) as db:
            db.run("INSERT INTO corpora (name, created_at) VALUES (?, ?) "
                   "ON CONFLICT (name) DO NOTHING", (name, now))
            for document in documents:
                doc = document_id(document.text)
                if db.one("SELECT 1 FROM corpus_documents WHERE corpus = ? AND doc_id = ?",
                          (name, doc)):
                    unchanged.append(document.source)
                    continue
                db.run("INSERT INTO corpus_documents (corpus, doc_id, source, bytes, added_at)"
                       " VALUES (?, ?, ?, ?, ?)", (name, doc, document.source,
                                                   len(document.text.encode("utf-8")), now))
                pieces = chunk(document.text)
                vectors = embedder.embed([p.text for p in pieces]) if embedder else None
                for n, piece in enumerate(pieces):
                    db.run("INSERT INTO corpus_chunks (corpus, doc_id, chunk_id, sentences, "
                           "text) VALUES (?, ?, ?, ?, ?)",
                           (name, doc, piece.id,
                            json.dumps([[s.id, s.text] for s in piece.sentences],
                                       ensure_ascii=False), piece.text))
                    if vectors is not None and embedder is not None:
                        db.run("INSERT INTO corpus_vectors (chunk, model, vector) VALUES ("
                               "(SELECT id FROM corpus_chunks WHERE corpus = ? AND "
                               "chunk_id = ?), ?, ?)", (name, piece.id, embedder.name,
                                                        vectors[n]))
                    chunks += 1
                added += 1
                if progress is not None:
                    progress(1)
        return Added(name, added, chunks, unchanged)

    def corpora(self) -> list[CorpusInfo]:
        with self.store.session() as db:
            rows = db.all(
                "SELECT c.name, c.created_at,"
                " (SELECT count(*) FROM corpus_documents d WHERE d.corpus = c.name),"
                " (SELECT count(*) FROM corpus_chunks k WHERE k.corpus = c.name),"
                " (SELECT coalesce(sum(bytes), 0) FROM corpus_documents d"
                "  WHERE d.corpus = c.name) FROM corpora c ORDER BY c.name")
        return [CorpusInfo(r[0], r[2], r[3], int(r[4]),
                           r[1] if isinstance(r[1], str) else format_time(r[1])) for r in rows]

    def remove(self, name: str) -> None:
        with self.store.session(write=True) as db:
            self._exists(db, name)
            db.run("DELETE FROM corpus_chunks WHERE corpus = ?", (name,))
            db.run("DELETE FROM corpora WHERE name = ?", (name,))

    def search_ready(self, name: str) -> None:
        """UnknownCorpus unless corpus ``name`` exists."""
        with self.store.session() as db:
            self._exists(db, name)

    def search(self, name: str, query: str, *, limit: int = 5) -> list[Passage]:
        """The ``limit`` best chunks for ``query``: BM25, fused with dense similarity where
        the corpus has embeddings; ties by chunk id."""
        terms = _terms(query)
        with self.store.session() as db:
            self._exists(db, name)
            if not terms:
                raise InputError(f"the query {query!r} has no words to search for",
                                 hint="ask with at least one word that is not a stopword")
            search, query_text = self._lexical
            lexical = [r[0] for r in db.all(search, (query_text(terms), name,
                                                     max(limit * 4, _CANDIDATES)))]
            vectors = [(r[0], r[1]) for r in db.all(
                "SELECT k.chunk_id, v.vector FROM corpus_vectors v JOIN corpus_chunks k"
                " ON k.id = v.chunk WHERE k.corpus = ?", (name,))]
            rankings = [lexical]
            if vectors:
                rankings.append(self.embedder().rank(query, vectors)[:_CANDIDATES])
            chosen = fuse(rankings)[:limit]
            rows = {r[0]: r for r in db.all(
                "SELECT k.chunk_id, d.source, k.text, k.sentences FROM corpus_chunks k"
                " JOIN corpus_documents d ON d.corpus = k.corpus AND d.doc_id = k.doc_id"
                f" WHERE k.corpus = ? AND k.chunk_id IN ({','.join('?' * len(chosen))})",
                (name, *chosen))} if chosen else {}
        return [Passage(r[0], r[1], r[2], tuple((s, t) for s, t in json.loads(r[3])))
                for r in (rows[c] for c in chosen)]

    def dense(self, name: str) -> bool:
        """Whether corpus ``name`` has embeddings (its searches are hybrid)."""
        with self.store.session() as db:
            return db.one("SELECT 1 FROM corpus_vectors v JOIN corpus_chunks k ON"
                          " k.id = v.chunk WHERE k.corpus = ? LIMIT 1", (name,)) is not None

    def _exists(self, db: Session, name: str) -> None:
        if db.one("SELECT 1 FROM corpora WHERE name = ?", (name,)) is None:
            raise UnknownCorpus(name)


def _terms(query: str) -> list[list[str]]:
    """What to search for: the query's anchors as phrases, then its other content words, each
    as its lower-cased words."""
    out: list[list[str]] = []
    for term in [*(p.strip('"“”\'') for p in must_preserve(query)),
                 *sorted(content_words(query))]:
        words = [w.casefold() for w in _LEXEME.findall(term)]
        if words and words not in out:
            out.append(words)
    return out


def fts5_query(terms: list[list[str]]) -> str:
    return " OR ".join('"' + " ".join(words).replace('"', '""') + '"' for words in terms)


def tsquery(terms: list[list[str]]) -> str:
    def lexeme(word: str) -> str:
        return "'" + word.replace("'", "''").replace("\\", "\\\\") + "'"
    return " | ".join("(" + " <-> ".join(map(lexeme, words)) + ")" for words in terms)


_LEXEME = re.compile(r"[^\W_]+")
# (the chunks matching a full-text query, best first, ties by chunk id; how to write the query)
_FTS5_SEARCH = (
    "SELECT k.chunk_id FROM corpus_fts JOIN corpus_chunks k ON k.id = corpus_fts.rowid"
    " WHERE corpus_fts MATCH ? AND k.corpus = ? ORDER BY bm25(corpus_fts), k.chunk_id LIMIT ?",
    fts5_query)
_TSVECTOR_SEARCH = (
    "SELECT chunk_id FROM (SELECT k.chunk_id, ts_rank_cd(k.search, q) AS rank"
    " FROM corpus_chunks k, to_tsquery('simple', ?) AS q WHERE k.search @@ q"
    " AND k.corpus = ?) AS found ORDER BY rank DESC, chunk_id LIMIT ?",
    tsquery)


def fuse(rankings: Sequence[Sequence[str]], *, k: int = 60) -> list[str]:
    """Reciprocal rank fusion of ranked id lists (score: the sum of 1 / (k + rank)); ties
    by id."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda item: (-scores[item], item))


def _check_name(name: str) -> None:
    if not name or name != name.strip() or len(name) > 64 or "/" in name:
        raise InputError(f"invalid corpus name {name!r}: use 1-64 characters, no slashes or "
                         "surrounding spaces")
