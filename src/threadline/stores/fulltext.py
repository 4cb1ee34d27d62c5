"""What differs between the databases' full-text search, and nothing else: the two search
statements and the query syntax they take. SQLite's (FTS5) is in ``stores/sqlite/fulltext.py``,
PostgreSQL's (tsvector) in ``stores/postgres/fulltext.py``; the memory and corpus SQL around
them is shared (``stores/memory_sql.py``, ``stores/corpus_sql.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

# what to match: phrases, each as its lower-cased words; any phrase may match
Phrases = Sequence[Sequence[str]]


@dataclass(frozen=True)
class FullText:
    # parameters (query, user_id, at, at, limit): memory_sql.ENTRY_SQL columns of the user's
    # entries current at ``at``, best first
    memory_search: str
    # parameters (query, corpus, limit): chunk ids, best first, ties by chunk id
    corpus_search: str
    query: Callable[[Phrases], str]  # phrases as the database's query syntax
