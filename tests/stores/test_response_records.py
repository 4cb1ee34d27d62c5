"""Response records kept beside the log, on both stores: one per message, a tombstone once
deleted, and gone with their conversation."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from threadline.errors import UnknownConversation
from threadline.items import NewItem
from threadline.stores.base import Commit, NewConversation, Store
from threadline.stores.responses import ResponseBackend, ResponseRecord, UnknownResponse
from threadline.stores.sqlite import SQLiteStore

AT = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        opened: Store = SQLiteStore(tmp_path / "t.db")
    else:
        from threadline.stores.postgres import PostgresStore
        opened = PostgresStore(request.getfixturevalue("postgres_url"))
    yield opened
    opened.close()


def _records(store: Store) -> ResponseBackend:
    assert store.responses is not None
    return store.responses


def _conversation(store: Store, cid: str = "c1") -> None:
    store.commit(Commit(conversation_id=cid, created_at=AT, create=NewConversation(cid),
                        items=[NewItem.user("hi"), NewItem.assistant("hello")]))


def _record(cid: str = "c1", rid: str = "resp_1") -> ResponseRecord:
    return ResponseRecord(rid, cid, "main", 1, 2, "call_1", AT, previous_response_id="resp_0",
                          instructions="Be terse.", metadata={"k": "v"})


def test_a_record_reads_back_as_it_was_saved(store: Store) -> None:
    _conversation(store)
    record = _record()
    assert _records(store).save(record) == record
    assert _records(store).get("resp_1") == record
    assert _records(store).for_message("c1", 1) == record
    assert _records(store).for_message("c1", 2) is None


def test_a_message_keeps_its_first_record(store: Store) -> None:
    _conversation(store)
    first = _records(store).save(_record())
    retried = _records(store).save(replace(_record(rid="resp_2"), created_at=AT + timedelta(1)))
    assert retried == first
    with pytest.raises(UnknownResponse, match="no response with id 'resp_2'"):
        _records(store).get("resp_2")


def test_a_deleted_record_stops_resolving_and_the_log_stays(store: Store) -> None:
    _conversation(store)
    _records(store).save(_record())
    _records(store).delete("resp_1", AT)
    with pytest.raises(UnknownResponse, match="was deleted"):
        _records(store).get("resp_1")
    with pytest.raises(UnknownResponse, match="was deleted"):
        _records(store).delete("resp_1", AT)
    found = _records(store).for_message("c1", 1)
    assert found is not None and found.deleted_at == AT
    assert [i.text for i in store.history("c1")] == ["hi", "hello"]
    with pytest.raises(UnknownResponse, match="no response with id 'resp_x'"):
        _records(store).delete("resp_x", AT)


def test_records_go_with_their_conversation(store: Store) -> None:
    _conversation(store)
    _records(store).save(_record())
    store.delete_conversation("c1")
    with pytest.raises(UnknownResponse, match="no response with id"):
        _records(store).get("resp_1")
    with pytest.raises(UnknownConversation):
        _records(store).save(_record())
