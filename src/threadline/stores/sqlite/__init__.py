"""SQLite backend: the embedded default."""

from threadline.stores.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
