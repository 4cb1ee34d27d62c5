"""Recognising a threadline database and migrating it on open.

Migrations are an append-only numbered list of SQL files (``migrations/NNNN_name.sql``); each
applies in its own transaction and is recorded in ``threadline_migrations``. A file is only
touched after it is known to be a threadline database (or empty) of a schema this code knows.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from threadline.errors import NotAThreadlineDatabase, SchemaTooNew
from threadline.items import format_time, utc_now
from threadline.stores.migrations import Migration, SchemaStatus, load

APPLICATION_ID = 0x54484C4E  # "THLN", in the SQLite header so `file` and tools can tell
SQLITE_HEADER = b"SQLite format 3\x00"


def migrations() -> list[Migration]:
    """The numbered migrations shipped with this package, in order."""
    return load("threadline.stores.sqlite")


def status(path: Path) -> SchemaStatus:
    """The file's schema version, read without changing it (0 for no file yet)."""
    version = 0
    if path.exists():
        check_file(path)
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            version = current_version(conn, path)
        finally:
            conn.close()
    return SchemaStatus("sqlite", str(path), version, len(migrations()))


def check_file(path: Path) -> None:
    """Refuse, before SQLite opens it, a file that is not an SQLite database at all."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise NotAThreadlineDatabase(str(path), "not an SQLite file")


def current_version(conn: sqlite3.Connection, path: Path) -> int:
    """The applied schema version (0 for an empty file), refusing foreign or newer files."""
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.OperationalError:
        raise  # cannot open or read (permissions, locks): the caller says which
    except sqlite3.DatabaseError as err:
        raise NotAThreadlineDatabase(str(path), str(err)) from err
    if app_id not in (0, APPLICATION_ID):
        raise NotAThreadlineDatabase(str(path), f"SQLite application id 0x{app_id:08x}")
    if "threadline_migrations" not in tables:
        if tables or app_id:
            raise NotAThreadlineDatabase(str(path), "an SQLite database without threadline's "
                                         "tables")
        return 0
    version = conn.execute("SELECT coalesce(max(version), 0) FROM threadline_migrations"
                           ).fetchone()[0]
    known = len(migrations())
    if version > known:
        raise SchemaTooNew(str(path), version, known)
    return int(version)


def migrate(conn: sqlite3.Connection, path: Path) -> list[int]:
    """Apply pending migrations, each in its own transaction. Returns the versions applied."""
    version = current_version(conn, path)
    applied = []
    for migration in migrations()[version:]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if migration.version == 1:
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute("CREATE TABLE IF NOT EXISTS threadline_migrations ("
                             "version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                             "applied_at TEXT NOT NULL)")
            for statement in _statements(migration.sql):
                conn.execute(statement)
            conn.execute("INSERT INTO threadline_migrations VALUES (?, ?, ?)",
                         (migration.version, migration.name, format_time(utc_now())))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        applied.append(migration.version)
    return applied


def _statements(sql: str) -> list[str]:
    """Split a migration script into complete statements."""
    statements, current = [], ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip() and not all(
            ln.strip().startswith("--") or not ln.strip() for ln in current.splitlines()):
        raise RuntimeError(f"migration ends with an incomplete statement: {current[:80]!r}")
    return statements
