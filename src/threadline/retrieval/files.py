"""Reading documents for a corpus from files and folders, refusing what is not text."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from threadline.retrieval.corpus import Document

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".rst", ".text"})
MAX_FILE_BYTES = 20 * 2**20


def files(paths: Iterable[Path]) -> Iterator[Path]:
    """The files named, and the text files under the folders named (sorted, hidden skipped)."""
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file()
                              and p.suffix.lower() in TEXT_SUFFIXES
                              and not any(part.startswith(".")
                                          for part in p.relative_to(path).parts))
        else:
            yield path


def read(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> Document | str:
    """The document in ``path``, or why it cannot be one."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return f"{path}: {size:,} bytes, over the {max_bytes:,}-byte limit; skipped"
        data = path.read_bytes()
    except OSError as err:
        return f"{path}: cannot be read ({err.strerror or err}); skipped"
    if b"\x00" in data:
        return f"{path}: binary, not text; skipped"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"{path}: not UTF-8 text (byte {err.start}); skipped"
    if not text.strip():
        return f"{path}: empty; skipped"
    return Document(str(path), text)
