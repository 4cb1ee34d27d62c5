"""The PostgreSQL store (``pip install threadline[postgres]``)."""

from threadline.stores.postgres.store import PostgresStore, migrate, redact, schema_status

__all__ = ["PostgresStore", "migrate", "redact", "schema_status"]
