"""SQLite's full-text search: FTS5 (BM25; Unicode tokens, diacritics folded).

Memory's index (``memory_fts``, Porter-stemmed) is created by migration 0009. The corpus's
index is created on first use (``create_corpus_index``), so a Python whose SQLite lacks FTS5
can still open the log.
"""

from __future__ import annotations

from threadline.errors import StoreError
from threadline.stores.fulltext import FullText, Phrases
from threadline.stores.memory_sql import CURRENT, ENTRY_SQL_M
from threadline.stores.sessions import Session

CORPUS_INDEX = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS corpus_fts USING fts5(text, content='corpus_chunks', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS corpus_chunks_added AFTER INSERT ON corpus_chunks BEGIN "
    "INSERT INTO corpus_fts (rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER IF NOT EXISTS corpus_chunks_removed AFTER DELETE ON corpus_chunks BEGIN "
    "INSERT INTO corpus_fts (corpus_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
)


def fts5_query(terms: Phrases) -> str:
    """Any of the phrases, each quoted (so no word is read as an FTS5 operator)."""
    return " OR ".join('"' + " ".join(words).replace('"', '""') + '"' for words in terms)


FTS5 = FullText(
    memory_search=(
        f"SELECT {ENTRY_SQL_M} FROM memory_fts f JOIN memory_entries m ON m.rowid = f.rowid "
        f"WHERE memory_fts MATCH ? AND m.user_id = ? AND {CURRENT} "
        "ORDER BY bm25(memory_fts), m.recorded_at DESC, m.id LIMIT ?"),
    corpus_search=(
        "SELECT k.chunk_id FROM corpus_fts JOIN corpus_chunks k ON k.id = corpus_fts.rowid"
        " WHERE corpus_fts MATCH ? AND k.corpus = ? ORDER BY bm25(corpus_fts), k.chunk_id"
        " LIMIT ?"),
    query=fts5_query)


def create_corpus_index(db: Session) -> None:
    """The corpus's FTS5 table and the triggers that keep it (if not there yet)."""
    try:
        for statement in CORPUS_INDEX:
            db.run(statement)
    except StoreError as err:
        if "fts5" not in str(err).lower():
            raise
        raise StoreError(f"this Python's SQLite cannot index text ({err})",
                         hint="use a Python built with SQLite FTS5") from err
