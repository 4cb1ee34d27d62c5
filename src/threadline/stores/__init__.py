"""Durable stores for the conversation log."""

from types import ModuleType

from threadline.errors import InputError
from threadline.settings import Settings
from threadline.stores.base import (
    MAIN,
    Commit,
    CommitResult,
    ConversationSummary,
    NewBranch,
    NewConversation,
    Store,
)
from threadline.stores.corpus import CorpusBackend
from threadline.stores.memory import MemoryBackend
from threadline.stores.sqlite import SQLiteStore


def open_store(settings: Settings) -> Store:
    """The store the settings name: PostgreSQL at ``THREADLINE_DATABASE_URL`` if set, else
    the SQLite file under ``THREADLINE_HOME``."""
    if settings.database_url is None:
        return SQLiteStore(settings.db_path, durability=settings.durability)
    store: Store = postgres_backend().PostgresStore(settings.database_url)
    return store


def postgres_backend() -> ModuleType:
    try:
        from threadline.stores import postgres
    except ImportError as err:
        raise InputError(f"PostgreSQL needs the postgres extra ({err.name} is missing)",
                         hint="pip install 'threadline[postgres]'") from err
    return postgres


__all__ = ["MAIN", "Commit", "CommitResult", "ConversationSummary", "CorpusBackend",
           "MemoryBackend", "NewBranch", "NewConversation", "SQLiteStore", "Store", "open_store",
           "postgres_backend"]
