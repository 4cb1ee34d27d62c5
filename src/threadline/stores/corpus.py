"""The CorpusBackend protocol: retrieval corpora (documents cut into chunks, their full-text
index and embeddings) and saved answers, as a store keeps them.

How documents are chunked and embedded, how rankings are fused and what saved answers's
keys are is decided above the store (``threadline.retrieval``); a backend keeps what it is
given and searches it. ``stores/corpus_conformance.py`` states this contract as tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from threadline.stores.fulltext import Phrases


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
class StoredChunk:
    chunk_id: str                           # DOC:cN
    text: str
    sentences: tuple[tuple[str, str], ...]  # (sentence id, text)
    vector: bytes | None = None             # its embedding, in a corpus with dense search


@dataclass(frozen=True)
class StoredDocument:
    doc_id: str     # a hash of the text: the same text, the same id
    source: str     # where it was read from
    bytes: int
    chunks: tuple[StoredChunk, ...]


@dataclass(frozen=True)
class NewAnswer:
    """An answer given from a corpus, under the keys it may be served again by."""

    corpus: str
    query_key: str   # the rewritten query, normalised
    anchors: str     # its must-preserve tokens, as one key
    passages: str    # the chunk ids it was given from, as one key
    answer: str
    conversation_id: str
    reply_seq: int
    call_id: str
    vector: bytes | None  # the query's embedding, where the corpus is dense
    created_at: datetime


@dataclass(frozen=True)
class StoredAnswer:
    id: int          # increases as answers are saved
    answer: str
    conversation_id: str
    reply_seq: int
    call_id: str
    vector: bytes | None


class CorpusBackend(Protocol):
    """Named corpora in the log's database. Every method either completes or changes
    nothing; UnknownCorpus is raised where a method needs a corpus that does not exist."""

    def add(self, corpus: str, documents: Sequence[StoredDocument], *, at: datetime,
            model: str | None = None) -> set[str]:
        """Create ``corpus`` if new and add ``documents`` with their chunks (and the vectors
        they carry, made by ``model``), all in one transaction. A document the corpus already
        has is skipped: the doc ids skipped."""
        ...

    def document_ids(self, corpus: str) -> set[str]:
        """The ids of the documents in ``corpus`` (none if it does not exist)."""
        ...

    def corpora(self) -> list[CorpusInfo]:
        """Every corpus, by name."""
        ...

    def exists(self, corpus: str) -> bool: ...

    def remove(self, corpus: str) -> None:
        """Delete the corpus with its documents, chunks, vectors and cached answers."""
        ...

    def lexical(self, corpus: str, phrases: Phrases, limit: int) -> list[str]:
        """The ids of the chunks matching any of ``phrases`` in the full-text index, best
        first, ties by chunk id; at most ``limit``."""
        ...

    def vectors(self, corpus: str) -> list[tuple[str, bytes]]:
        """(chunk id, vector) of every embedded chunk in ``corpus``."""
        ...

    def dense(self, corpus: str) -> bool:
        """Whether any chunk of ``corpus`` has a vector."""
        ...

    def passages(self, corpus: str, chunk_ids: Sequence[str]) -> list[Passage]:
        """The chunks named, in the order asked (ids the corpus lacks are left out)."""
        ...

    # -- saved answers ----------------------------------------------------------------

    def save_answer(self, answer: NewAnswer) -> None: ...

    def exact_answer(self, corpus: str, query_key: str, passages: str) -> StoredAnswer | None:
        """The newest answer saved under exactly these keys."""
        ...

    def answers_by_anchors(self, corpus: str, anchors: str,
                           passages: str) -> list[StoredAnswer]:
        """The answers with a vector saved under these anchors and passages, oldest first."""
        ...
