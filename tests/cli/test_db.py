"""``threadline db status|migrate`` on SQLite and PostgreSQL, and what a store refuses."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Invoke
from threadline.stores.sqlite.schema import migrations as sqlite_migrations


def test_sqlite_status_then_migrate(tl: Invoke, home: Path) -> None:
    latest = len(sqlite_migrations())
    before = tl("db", "status", "--json")
    assert before.code == 0, before.err
    assert before.json() == {"backend": "sqlite", "database": str(home / "threadline.db"),
                             "version": 0, "latest": latest,
                             "pending": list(range(1, latest + 1))}
    assert not (home / "threadline.db").exists()  # status changes nothing
    migrated = tl("db", "migrate", "--json")
    assert migrated.json()["applied"] == list(range(1, latest + 1))
    again = tl("db", "migrate")
    assert again.code == 0 and "nothing to apply" in again.out
    assert f"schema version {latest} of {latest}; pending: none" in tl("db", "status").out


def test_postgres_needs_an_explicit_migrate(tl: Invoke, empty_postgres_url: str) -> None:
    url = ["--database-url", empty_postgres_url]
    refused = tl(*url, "chat", "--once", "hello")
    assert refused.code == 4
    assert "has no threadline tables" in refused.err and "threadline db migrate" in refused.err
    assert tl(*url, "db", "status", "--json").json()["version"] == 0
    migrated = tl(*url, "db", "migrate", "--json")
    assert migrated.code == 0 and migrated.json()["pending"] == []
    assert migrated.json()["applied"]
    chat = tl(*url, "chat", "--once", "hello", "--json")
    assert chat.code == 0, chat.err
    listed = tl(*url, "conversations", "list", "--json").json()
    assert [c["id"] for c in listed] == [chat.json()["conversation_id"]]


def test_an_unreachable_database_is_one_clear_line(tl: Invoke) -> None:
    result = tl("--database-url", "postgresql://nobody:pw@127.0.0.1:1/none", "db", "status")
    assert result.code == 4
    assert "cannot use the PostgreSQL database" in result.err and "pw" not in result.err


def test_a_malformed_database_url_is_input_error(tl: Invoke) -> None:
    result = tl("--database-url", "host=127.0.0.1 port", "conversations", "list")
    assert result.code == 2 and "not a valid PostgreSQL connection string" in result.err
