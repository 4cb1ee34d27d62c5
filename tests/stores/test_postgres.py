"""PostgreSQL specifics: explicit migrations, refusing what it cannot use, replicas."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest

from threadline.errors import InputError, SchemaTooNew, StoreError
from threadline.items import NewItem, canonical_json, transcript_hash, transcript_root
from threadline.stores.base import Commit, NewConversation
from threadline.stores.postgres import PostgresStore, migrate, redact, schema_status
from threadline.stores.postgres.schema import migrations
from threadline.stores.postgres.store import TRANSCRIPTS

_T0 = datetime(2026, 1, 2, tzinfo=UTC)


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}


def test_an_unmigrated_database_is_refused_with_the_command_that_fixes_it(
        empty_postgres_url: str) -> None:
    with pytest.raises(StoreError, match="has no threadline tables") as caught:
        PostgresStore(empty_postgres_url)
    assert caught.value.hint is not None and "threadline db migrate" in caught.value.hint
    assert _tables(empty_postgres_url) == set()  # opening a store never changes the schema


def test_migrate_applies_each_migration_once_even_when_run_concurrently(
        empty_postgres_url: str) -> None:
    assert schema_status(empty_postgres_url).pending == [m.version for m in migrations()]
    applied: list[list[int]] = []
    runs = [threading.Thread(target=lambda: applied.append(migrate(empty_postgres_url)[1]))
            for _ in range(3)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert sorted(applied, key=len) == [[], [], [m.version for m in migrations()]]
    status = schema_status(empty_postgres_url)
    assert (status.version, status.pending) == (len(migrations()), [])
    with psycopg.connect(empty_postgres_url) as conn:
        rows = conn.execute("SELECT version FROM threadline_migrations ORDER BY version")
        assert [r[0] for r in rows] == [m.version for m in migrations()]


def test_a_newer_schema_is_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO threadline_migrations (version, name) VALUES (999, 'future')")
    with pytest.raises(SchemaTooNew):
        PostgresStore(postgres_url)
    with pytest.raises(SchemaTooNew):
        migrate(postgres_url)


def test_an_unreachable_server_is_a_clear_error_without_the_password() -> None:
    url = "postgresql://someone:s3cret@127.0.0.1:1/nowhere"
    with pytest.raises(StoreError, match="cannot use the PostgreSQL database .*refused") as caught:
        PostgresStore(url, connect_timeout_s=1)
    assert "s3cret" not in str(caught.value) and "THREADLINE_DATABASE_URL" in str(
        caught.value.hint)
    assert "s3cret" not in redact(url) and "nowhere" in redact(url)


def test_a_malformed_url_is_input_error() -> None:
    with pytest.raises(InputError, match="not a valid PostgreSQL connection string"):
        PostgresStore("host=127.0.0.1 port")


def test_text_postgresql_cannot_hold_is_refused_and_nothing_is_written(
        postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    try:
        with pytest.raises(InputError, match="NUL"):
            store.commit(Commit(conversation_id="c_nul", created_at=_T0,
                                create=NewConversation("c_nul", system="be\x00brief"),
                                items=[NewItem.user("hi")]))
        assert store.conversations() == []
    finally:
        store.close()


def test_migrating_gives_older_rows_their_transcript_hashes(
        empty_postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from threadline.stores.postgres import schema

    before = migrations()[:TRANSCRIPTS - 1]
    monkeypatch.setattr(schema, "migrations", lambda: before)
    migrate(empty_postgres_url)
    monkeypatch.undo()
    with psycopg.connect(empty_postgres_url) as conn:  # rows as the older schema held them
        conn.execute("INSERT INTO conversations (id, created_at, system, metadata) "
                     "VALUES ('c_old', now(), 'be kind', '{}')")
        conn.execute("INSERT INTO branches (conversation_id, name, created_at) "
                     "VALUES ('c_old', 'main', now())")
        conn.execute("INSERT INTO items (conversation_id, seq, branch, parent_seq, turn, kind,"
                     " content, hash, created_at) VALUES ('c_old', 1, 'main', NULL, 1, "
                     "'user_message', %s, 'b2:x', now())",
                     (canonical_json({"text": "from before"}),))
    assert TRANSCRIPTS in migrate(empty_postgres_url)[1]
    store = PostgresStore(empty_postgres_url)
    try:
        assert store.transcript("c_old", 1) == transcript_hash(transcript_root("be kind"),
                                                               "user", "from before")
    finally:
        store.close()
