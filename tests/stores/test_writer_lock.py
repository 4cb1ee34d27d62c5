"""The SQLite store's writer lock: processes take ``<file>-writer`` in turn around each
transaction (a waiter wakes as the holder commits), and a directory where the lock file
cannot be made leaves SQLite's own lock to serialise writers."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from threadline.engine import Engine
from threadline.models.scripted import ScriptedModel
from threadline.stores.sqlite import SQLiteStore


def test_a_commit_waits_for_the_writer_lock_another_holds(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    engine = Engine(store, ScriptedModel())
    cid = engine.new_conversation()
    # another open file description: flock makes it wait as it would for another process
    other = os.open(tmp_path / "t.db-writer", os.O_RDWR)
    fcntl.flock(other, fcntl.LOCK_EX)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (engine.run_turn("hello", conversation_id=cid),
                                              done.set()))
    thread.start()
    try:
        assert not done.wait(0.5)  # held back, not failed
        assert list(store.history(cid)) == []
    finally:
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
    thread.join(10)
    assert done.is_set()
    assert [item.text for item in store.history(cid)][0] == "hello"
    store.close()


def test_where_the_lock_file_cannot_be_opened_commits_go_on(tmp_path: Path) -> None:
    (tmp_path / "t.db-writer").mkdir()  # not openable for writing, even by root
    store = SQLiteStore(tmp_path / "t.db")
    engine = Engine(store, ScriptedModel())
    cid = engine.new_conversation()
    engine.run_turn("hello", conversation_id=cid)
    assert [item.text for item in store.history(cid)][0] == "hello"
    store.close()
