"""Documents into chunks and sentences with stable ids.

A document's id is a hash of its text, so adding the same text again (from any path, on any
machine) gives the same ids, and a citation stays valid as long as the text it points at is
unchanged. Chunks are consecutive sentences up to a size, never splitting a sentence (a sentence
longer than the size is its own chunk); ids are ``DOC:cN`` for chunks and ``DOC:cN:sM`` for
sentences, counted from 1.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

CHUNK_CHARS = 800
# a sentence ends at . ! or ? (and any closing quote or bracket) followed by white space and
# what can start a sentence, so "$12.4 billion" and "e.g. for" stay whole (a wrapped line
# inside a paragraph is one line)
_BOUNDARY = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'’”)\]]))\s+(?=[A-Z0-9\"'“‘(\[#*-])")
_PARAGRAPH = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class Sentence:
    id: str
    text: str


@dataclass(frozen=True)
class Chunk:
    id: str
    doc_id: str
    ordinal: int
    sentences: tuple[Sentence, ...]

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.sentences)


def document_id(text: str) -> str:
    return "d" + hashlib.blake2b(" ".join(text.split()).encode("utf-8"),
                                 digest_size=6).hexdigest()


def sentences(paragraph: str) -> list[str]:
    return [s for s in (" ".join(part.split()) for part in _BOUNDARY.split(paragraph)) if s]


def chunk(text: str, *, size: int = CHUNK_CHARS) -> list[Chunk]:
    """``text`` cut into chunks of whole sentences, paragraphs kept apart."""
    doc = document_id(text)
    groups: list[list[str]] = []
    for paragraph in _PARAGRAPH.split(text):
        current: list[str] = []
        for sentence in sentences(paragraph):
            if current and sum(len(s) + 1 for s in current) + len(sentence) > size:
                groups.append(current)
                current = []
            current.append(sentence)
        if current:
            groups.append(current)
    out = []
    for n, group in enumerate(groups, start=1):
        chunk_id = f"{doc}:c{n}"
        out.append(Chunk(chunk_id, doc, n, tuple(Sentence(f"{chunk_id}:s{m}", s)
                                                 for m, s in enumerate(group, start=1))))
    return out
