"""Durable stores for the conversation log."""

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
from threadline.stores.sqlite import SQLiteStore


def open_store(settings: Settings) -> Store:
    """The store the settings name: the SQLite file under ``THREADLINE_HOME``."""
    return SQLiteStore(settings.db_path, durability=settings.durability)


__all__ = ["MAIN", "Commit", "CommitResult", "ConversationSummary", "NewBranch",
           "NewConversation", "SQLiteStore", "Store", "open_store"]
