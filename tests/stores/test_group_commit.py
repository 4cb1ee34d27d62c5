"""Group commit: concurrent commits share a transaction, each atomic on its own."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from threadline.engine import Engine
from threadline.items import NewItem, utc_now
from threadline.models.scripted import ScriptedModel
from threadline.stores.base import Commit
from threadline.stores.sessions import Execute, Session
from threadline.stores.sqlite import SQLiteStore
from threadline.stores.sqlite.group import GroupCommit
from threadline.stores.verify import verify_conversation


class Table:
    """A connection with one table, and a GroupCommit over it that counts its transactions."""

    def __init__(self, path: Path, *, fail_commit: bool = False) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("CREATE TABLE rows (name TEXT PRIMARY KEY)")
        self.transactions = 0
        self.fail_commit = fail_commit
        self.committed: list[Session] = []
        self.group = GroupCommit(self.begin, lambda: self.conn.in_transaction,
                                 self.committed.append)

    @contextmanager
    def begin(self) -> Iterator[Execute]:
        self.transactions += 1
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn.execute
            if self.fail_commit:
                raise sqlite3.OperationalError("disk I/O error")
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise

    def names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM rows ORDER BY name")]


def insert(name: str) -> Callable[[Session], str]:
    def work(db: Session) -> str:
        db.run("INSERT INTO rows (name) VALUES (?)", (name,))
        return name
    return work


def grouped(table: Table, works: list[Callable[[Session], Any]]) -> list[Any]:
    """Runs the first work alone while the others queue behind it, so they form one group;
    each thread's outcome (its result, or the exception it raised)."""
    release = threading.Event()
    outcomes: list[Any] = [None] * (len(works) + 1)

    def first(db: Session) -> str:
        release.wait(10)
        return insert("first")(db)

    def call(n: int, work: Callable[[Session], Any]) -> None:
        try:
            outcomes[n] = table.group.run(work)
        except Exception as err:
            outcomes[n] = err

    threads = [threading.Thread(target=call, args=(0, first))]
    threads[0].start()
    while not table.group._queue:
        time.sleep(0.001)
    for n, work in enumerate(works, start=1):
        threads.append(threading.Thread(target=call, args=(n, work)))
        threads[-1].start()
    while len(table.group._queue) < len(works) + 1:  # every one waiting behind the first
        time.sleep(0.001)
    release.set()
    for thread in threads:
        thread.join(10)
    return outcomes


def test_commits_queued_behind_one_share_one_transaction(tmp_path: Path) -> None:
    table = Table(tmp_path / "t.db")
    outcomes = grouped(table, [insert("a"), insert("b"), insert("c")])
    assert outcomes == ["first", "a", "b", "c"]
    assert table.names() == ["a", "b", "c", "first"]
    assert table.transactions == 2  # the first alone, then the three together
    assert len(table.committed) == 4


def test_a_commit_that_fails_is_rolled_back_alone(tmp_path: Path) -> None:
    table = Table(tmp_path / "t.db")

    def half_then_fail(db: Session) -> None:
        db.run("INSERT INTO rows (name) VALUES ('half')")
        raise ValueError("refused")

    outcomes = grouped(table, [insert("a"), half_then_fail, insert("first")])
    assert outcomes[1] == "a"
    assert isinstance(outcomes[2], ValueError) and str(outcomes[2]) == "refused"
    assert isinstance(outcomes[3], sqlite3.IntegrityError)  # "first" was taken by then
    assert table.names() == ["a", "first"]  # nothing of the failed ones
    assert table.transactions == 2
    assert len(table.committed) == 2  # only what was written learns anything


def test_an_error_that_ends_the_transaction_fails_the_whole_group(tmp_path: Path) -> None:
    table = Table(tmp_path / "t.db")

    def lose_the_transaction(db: Session) -> None:
        db.run("ROLLBACK")  # as SQLite does itself on a full disk
        raise sqlite3.OperationalError("database or disk is full")

    outcomes = grouped(table, [insert("a"), lose_the_transaction, insert("b")])
    assert outcomes[0] == "first"
    assert all(isinstance(o, sqlite3.OperationalError) for o in outcomes[1:])
    assert table.names() == ["first"]  # "a" ran before the loss, and is not written either


def test_a_failed_commit_fails_every_member_and_writes_nothing(tmp_path: Path) -> None:
    table = Table(tmp_path / "t.db", fail_commit=True)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        table.group.run(insert("alone"))
    assert table.names() == []
    assert table.committed == []


def test_concurrent_turns_keep_every_conversation_whole(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    transactions = 0
    begin = store._begin

    @contextmanager
    def counted() -> Iterator[Execute]:
        nonlocal transactions
        transactions += 1
        with begin() as execute:
            yield execute

    store._group = GroupCommit(counted, lambda: store._conn.in_transaction, store._committed)
    engine = Engine(store, ScriptedModel())
    conversations = [engine.new_conversation() for _ in range(8)]
    errors: list[BaseException] = []

    def client(cid: str) -> None:
        try:
            for k in range(10):
                engine.run_turn(f"message {k} of {cid}", conversation_id=cid)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=client, args=(cid,)) for cid in conversations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    for cid in conversations:
        texts = [item.text for item in store.history(cid)]
        assert texts[::2] == [f"message {k} of {cid}" for k in range(10)]
        assert verify_conversation(store, cid) == []
    assert transactions <= 8 * 10 * 2  # never more than one a commit; fewer when they meet
    store.close()


def test_a_lone_commit_that_fails_is_rolled_back(tmp_path: Path) -> None:
    table = Table(tmp_path / "t.db")

    def half_then_fail(db: Session) -> None:
        db.run("INSERT INTO rows (name) VALUES ('half')")
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        table.group.run(half_then_fail)
    assert table.names() == []
    assert table.committed == []
    assert table.group.run(insert("next")) == "next"  # the connection is usable after it
    assert table.names() == ["next"]


def test_a_commit_inside_a_commit_is_refused_not_deadlocked(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    engine = Engine(store, ScriptedModel())
    cid = engine.new_conversation()
    head = store.head(cid)
    nested = Commit(conversation_id=cid, created_at=utc_now(), check_head=False,
                    items=[NewItem.user("nested")])
    outcome: list[BaseException | None] = []

    def commit_within() -> None:
        try:
            store._write(lambda db: store.commit(nested))
            outcome.append(None)
        except Exception as err:
            outcome.append(err)

    thread = threading.Thread(target=commit_within, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "a commit inside a commit waited for itself"
    assert isinstance(outcome[0], Exception) and "transaction" in str(outcome[0])
    assert store.head(cid) == head  # nothing written
    store.close()
