"""A user's documents, searchable: the corpus kept beside the log, in the same database.

Documents are chunked with stable ids (``chunks``) and indexed for full text: SQLite FTS5 (BM25,
Unicode tokens, diacritics folded) or a PostgreSQL tsvector (``ts_rank_cd``, the 'simple'
configuration); a corpus added with dense search also keeps each chunk's sentence
embedding (``dense``). A search ranks chunks by BM25 and, where there are embeddings, by
similarity too, and fuses the two rankings by reciprocal rank; ties are broken by chunk id, so
the same query over the same corpus always returns the same passages in the same order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from threadline.errors import InputError, UnknownCorpus
from threadline.items import utc_now
from threadline.retrieval.chunks import chunk, document_id
from threadline.retrieval.dense import Embedder
from threadline.rewrite.anchors import content_words, must_preserve
from threadline.stores.base import Store
from threadline.stores.corpus import (
    CorpusBackend,
    CorpusInfo,
    Passage,
    StoredChunk,
    StoredDocument,
)

__all__ = ["Added", "Corpus", "CorpusInfo", "Document", "Passage", "corpora_of", "fuse"]

_CANDIDATES = 50  # each ranking's depth before fusion


@dataclass(frozen=True)
class Document:
    source: str
    text: str


@dataclass(frozen=True)
class Added:
    corpus: str
    documents: int
    chunks: int
    unchanged: list[str]  # sources whose text the corpus already had

    def to_json(self) -> dict[str, object]:
        return {"corpus": self.corpus, "documents": self.documents, "chunks": self.chunks,
                "unchanged": self.unchanged}


def corpora_of(store: Store) -> CorpusBackend:
    """The store's corpora, or an InputError for a store that keeps none."""
    backend = store.corpora
    if backend is None:
        raise InputError(f"{type(store).__name__} keeps no corpora",
                         hint="use a SQLite or PostgreSQL store for corpora")
    return backend


class Corpus:
    """The corpora of one store (its ``corpora``; InputError if it keeps none). ``embedder``
    makes the dense model (it loads in a few seconds, so only when a corpus with embeddings
    is added to or searched)."""

    def __init__(self, store: Store,
                 embedder: Callable[[], Embedder] | None = None) -> None:
        self.store = store
        self.backend = corpora_of(store)
        self._make_embedder = embedder
        self._embedder: Embedder | None = None

    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = (self._make_embedder or Embedder)()
        return self._embedder

    def add(self, name: str, documents: Iterable[Document], *, dense: bool = False,
            progress: Callable[[int], None] | None = None) -> Added:
        """Add documents to corpus ``name`` (created if new), all in one transaction; with
        ``dense``, with the embedding of every new chunk. A text the corpus already has is
        neither chunked nor embedded again."""
        _check_name(name)
        embedder = self.embedder() if dense else None
        now = utc_now()
        known = self.backend.document_ids(name)
        new: list[StoredDocument] = []
        sources: dict[str, str] = {}
        unchanged = []
        for document in documents:
            doc = document_id(document.text)
            if doc in known:
                unchanged.append(document.source)
                continue
            known.add(doc)
            pieces = chunk(document.text)
            vectors = embedder.embed([p.text for p in pieces]) if embedder else None
            new.append(StoredDocument(doc, document.source, len(document.text.encode("utf-8")),
                                      tuple(StoredChunk(piece.id, piece.text,
                                                        tuple((s.id, s.text)
                                                              for s in piece.sentences),
                                                        None if vectors is None else vectors[n])
                                            for n, piece in enumerate(pieces))))
            sources[doc] = document.source
            if progress is not None:
                progress(1)
        # another writer may have added one of them meanwhile: the backend skips it
        skipped = self.backend.add(name, new, at=now,
                                   model=None if embedder is None else embedder.name)
        unchanged += [sources[d.doc_id] for d in new if d.doc_id in skipped]
        kept = [d for d in new if d.doc_id not in skipped]
        return Added(name, len(kept), sum(len(d.chunks) for d in kept), unchanged)

    def corpora(self) -> list[CorpusInfo]:
        return self.backend.corpora()

    def remove(self, name: str) -> None:
        self.backend.remove(name)

    def search_ready(self, name: str) -> None:
        """UnknownCorpus unless corpus ``name`` exists."""
        if not self.backend.exists(name):
            raise UnknownCorpus(name)

    def search(self, name: str, query: str, *, limit: int = 5) -> list[Passage]:
        """The ``limit`` best chunks for ``query``: BM25, fused with dense similarity where
        the corpus has embeddings; ties by chunk id."""
        terms = _terms(query)
        self.search_ready(name)
        if not terms:
            raise InputError(f"the query {query!r} has no words to search for",
                             hint="ask with at least one word that is not a stopword")
        lexical = self.backend.lexical(name, terms, max(limit * 4, _CANDIDATES))
        vectors = self.backend.vectors(name)
        rankings = [lexical]
        if vectors:
            rankings.append(self.embedder().rank(query, vectors)[:_CANDIDATES])
        return self.backend.passages(name, fuse(rankings)[:limit])

    def dense(self, name: str) -> bool:
        """Whether corpus ``name`` has embeddings (its searches are hybrid)."""
        return self.backend.dense(name)


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


_LEXEME = re.compile(r"[^\W_]+")


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
