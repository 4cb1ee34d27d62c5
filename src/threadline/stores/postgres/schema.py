"""The PostgreSQL schema: applied only by an explicit ``threadline db migrate``.

A server fleet shares one database, so no replica changes the schema on its own: a store
refuses to open a database whose schema is behind and says which command brings it up to date.
Migrations run in one transaction under an advisory lock, so two operators (or two deploy
jobs) running ``migrate`` at once apply each migration exactly once.
"""

from __future__ import annotations

import psycopg

from threadline.errors import SchemaTooNew, StoreError
from threadline.stores.migrations import Migration, SchemaStatus, load

_LOCK_KEY = 0x54484C4E  # "THLN"


def migrations() -> list[Migration]:
    return load("threadline.stores.postgres")


def current_version(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    row = conn.execute("SELECT to_regclass('threadline_migrations') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return 0
    version = conn.execute("SELECT coalesce(max(version), 0) FROM threadline_migrations"
                           ).fetchone()
    return 0 if version is None else int(version[0])  # type: ignore[call-overload]


def status(conn: psycopg.Connection[tuple[object, ...]], where: str) -> SchemaStatus:
    return SchemaStatus("postgres", where, current_version(conn), len(migrations()))


def require_current(conn: psycopg.Connection[tuple[object, ...]], where: str) -> None:
    """Refuse a database this threadline cannot use as it is."""
    found = status(conn, where)
    if found.version > found.latest:
        raise SchemaTooNew(where, found.version, found.latest)
    if found.version < found.latest:
        state = ("has no threadline tables" if found.version == 0
                 else f"is at schema version {found.version} of {found.latest}")
        raise StoreError(f"the PostgreSQL database {where} {state}",
                         hint="run `threadline db migrate` against it first")


def migrate(conn: psycopg.Connection[tuple[object, ...]], where: str) -> list[int]:
    """Apply pending migrations in one transaction. Returns the versions applied."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute("CREATE TABLE IF NOT EXISTS threadline_migrations ("
                     "version integer PRIMARY KEY, name text NOT NULL, "
                     "applied_at timestamptz NOT NULL DEFAULT now())")
        version = current_version(conn)
        if version > len(migrations()):
            raise SchemaTooNew(where, version, len(migrations()))
        applied = []
        for migration in migrations()[version:]:
            conn.execute(migration.sql.encode("utf-8"))  # a script: several statements
            conn.execute("INSERT INTO threadline_migrations (version, name) VALUES (%s, %s)",
                         (migration.version, migration.name))
            applied.append(migration.version)
    return applied
