"""SQLite specifics: recognising foreign files, migrations, durability settings."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from threadline.errors import InputError, NotAThreadlineDatabase, SchemaTooNew
from threadline.items import (
    ItemKind,
    NewItem,
    canonical_json,
    chain_hash,
    format_time,
    transcript_hash,
    transcript_root,
    utc_now,
)
from threadline.settings import Durability
from threadline.stores.base import Commit, NewConversation
from threadline.stores.sqlite import SQLiteStore, schema
from threadline.stores.sqlite.schema import APPLICATION_ID, migrations


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_migrations_are_numbered_one_to_n() -> None:
    found = migrations()
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert all(m.name and m.sql.strip() for m in found)


def test_open_applies_every_migration_and_marks_the_file(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "t.db").close()
    conn = sqlite3.connect(tmp_path / "t.db")
    versions = [row[0] for row in conn.execute("SELECT version FROM threadline_migrations")]
    assert versions == [m.version for m in migrations()]
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize(("durability", "level"),
                         [(Durability.FULL, 2), (Durability.NORMAL, 1), (Durability.OFF, 0)])
def test_durability_sets_synchronous(tmp_path: Path, durability: Durability,
                                     level: int) -> None:
    store = SQLiteStore(tmp_path / "t.db", durability=durability)
    try:
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == level
    finally:
        store.close()


def test_the_default_durability_survives_power_loss(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    try:
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        store.close()


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    path.write_bytes(b"this is a text file, not a database\n" * 20)
    before = _digest(path)
    with pytest.raises(NotAThreadlineDatabase, match="not an SQLite file"):
        SQLiteStore(path)
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.db"]


def test_another_applications_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.commit()
    conn.close()
    before = _digest(path)
    with pytest.raises(NotAThreadlineDatabase, match="without threadline's tables"):
        SQLiteStore(path)
    assert _digest(path) == before


def test_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # fold the WAL in, so one file tells all
    conn.execute("INSERT INTO threadline_migrations VALUES (999, 'from_the_future', 'x')")
    conn.commit()
    conn.close()
    before = _digest(path)
    with pytest.raises(SchemaTooNew, match="schema version 999"):
        SQLiteStore(path)
    assert _digest(path) == before


def test_a_commit_that_fails_leaves_no_trace(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    try:
        with pytest.raises(InputError, match="already exists"):
            # the same conversation id twice: the second create must roll back entirely
            for _ in range(2):
                store.commit(Commit(conversation_id="c_same", created_at=utc_now(),
                                    create=NewConversation("c_same"),
                                    items=[NewItem.user("hello")]))
        assert [i.text for i in store.history("c_same")] == ["hello"]
    finally:
        store.close()


def test_an_older_database_is_migrated_on_open(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "old.db"
    first_only = migrations()[:1]
    monkeypatch.setattr(schema, "migrations", lambda: first_only)
    SQLiteStore(path).close()
    monkeypatch.undo()
    # rows as a threadline of schema version 1 wrote them
    now, content = format_time(utc_now()), canonical_json({"text": "from v1"})
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO conversations (id, created_at, system, metadata) "
                 "VALUES ('c_old', ?, 'be kind', '{}')", (now,))
    conn.execute("INSERT INTO branches (conversation_id, name, created_at) "
                 "VALUES ('c_old', 'main', ?)", (now,))
    conn.execute("INSERT INTO items (conversation_id, seq, branch, parent_seq, turn, kind, "
                 "content, hash, created_at) VALUES ('c_old', 1, 'main', NULL, 1, "
                 "'user_message', ?, ?, ?)",
                 (content, chain_hash(None, ItemKind.USER, {"text": "from v1"}), now))
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    try:
        versions = [r[0] for r in store._conn.execute("SELECT version FROM threadline_migrations")]
        assert versions == [m.version for m in migrations()] and len(versions) >= 2
        columns = {r[1] for r in store._conn.execute("PRAGMA table_info(model_calls)")}
        assert "prefix_report" in columns
        assert [i.text for i in store.history("c_old")] == ["from v1"]
        # the old row got its transcript hash, and the log carries the chain on from it
        assert store.transcript("c_old", 1) == transcript_hash(transcript_root("be kind"),
                                                               "user", "from v1")
        store.commit(Commit(conversation_id="c_old", created_at=utc_now(), expected_head=1,
                            items=[NewItem.assistant("from now")]))
        assert [m.seq for m in store.matching_messages([transcript_hash(
            store.transcript("c_old", 1) or "", "assistant", "from now")])] == [2]
        assert store.conversation("c_old").owner is None  # no one's: admin only
    finally:
        store.close()


def test_reads_do_not_wait_behind_an_open_commit_and_see_only_what_committed(
        tmp_path: Path) -> None:
    import threading

    store = SQLiteStore(tmp_path / "t.db")
    cid = "c_reads"
    store.commit(Commit(conversation_id=cid, created_at=utc_now(), expected_head=None,
                        items=[NewItem.user("one")], create=NewConversation(cid)))
    inside, release, seen = threading.Event(), threading.Event(), []

    def writer() -> None:
        with store._session(write=True) as db:  # holds the write lock until released
            db.run("UPDATE conversations SET title = 'changed' WHERE id = ?", (cid,))
            # a read in this thread's own transaction sees what the transaction wrote
            seen.append(store.conversation(cid).title)
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert inside.wait(10)
        # another thread reads meanwhile, without waiting for the commit, and sees the
        # last committed state
        assert [i.content["text"] for i in store.history(cid)] == ["one"]
        assert store.conversation(cid).title is None
    finally:
        release.set()
        thread.join(10)
    assert seen == ["changed"]
    assert store.conversation(cid).title == "changed"  # once committed, every read sees it
    store.close()


def test_the_read_connections_refuse_to_write(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    with pytest.raises(Exception, match="readonly|read-only"), store._session() as db:
        db.run("CREATE TABLE scratch (x INTEGER)")
    store.close()
