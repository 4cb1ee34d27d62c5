"""PostgreSQL's full-text search: generated tsvector columns with GIN indexes (migrations 0002
and 0005), ranked by ``ts_rank_cd``; memory's is 'english' (stemmed), the corpus's 'simple'."""

from __future__ import annotations

from threadline.stores.fulltext import FullText, Phrases
from threadline.stores.memory_sql import CURRENT, ENTRY_SQL_M


def tsquery(terms: Phrases) -> str:
    """Any of the phrases, each word quoted as a lexeme and a phrase's words adjacent."""
    def lexeme(word: str) -> str:
        return "'" + word.replace("'", "''").replace("\\", "\\\\") + "'"
    return " | ".join("(" + " <-> ".join(map(lexeme, words)) + ")" for words in terms)


TSVECTOR = FullText(
    memory_search=(
        f"SELECT {ENTRY_SQL_M} FROM memory_entries m, to_tsquery('english', ?) AS q "
        f"WHERE m.search @@ q AND m.user_id = ? AND {CURRENT} "
        "ORDER BY ts_rank_cd(m.search, q) DESC, m.recorded_at DESC, m.id LIMIT ?"),
    corpus_search=(
        "SELECT chunk_id FROM (SELECT k.chunk_id, ts_rank_cd(k.search, q) AS rank"
        " FROM corpus_chunks k, to_tsquery('simple', ?) AS q WHERE k.search @@ q"
        " AND k.corpus = ?) AS found ORDER BY rank DESC, chunk_id LIMIT ?"),
    query=tsquery)
