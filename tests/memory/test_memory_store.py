"""Memory entries on both stores: partitioned by user, provenance, history, time, deletion."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.memory.conftest import T0, Clock
from threadline.engine import Engine
from threadline.errors import InputError
from threadline.memory import MemoryKind, MemoryStore, NewMemory, Source, UnknownMemory
from threadline.memory.recall import MemoryRecall
from threadline.memory.writer import MemoryWriter
from threadline.models.scripted import ScriptedModel
from threadline.standard import standard_engine
from threadline.stores.relational import RelationalStore
from threadline.stores.sqlite import SQLiteStore


def test_an_entry_keeps_its_provenance_and_trust(memory: MemoryStore,
                                                 log: RelationalStore, clock: Clock) -> None:
    cid = Engine(log, ScriptedModel()).run_turn("I'm vegetarian.").conversation_id
    stated = memory.add("ann", NewMemory("Ann is vegetarian", conversation_id=cid,
                                         item_seqs=(1,)))
    clock.now = T0 + timedelta(seconds=1)  # entries list oldest first
    inferred = memory.add("ann", NewMemory("Ann likes Italian food",
                                           source=Source.MODEL_INFERRED))
    got = memory.get("ann", stated.id)
    assert got == stated and got.trusted and got.recorded_at == T0
    assert (got.conversation_id, got.item_seqs) == (cid, (1,))
    assert not memory.get("ann", inferred.id).trusted  # only what the user said is trusted
    assert [e.text for e in memory.entries("ann")] == ["Ann is vegetarian",
                                                       "Ann likes Italian food"]


def test_one_user_never_reaches_another_users_memory(memory: MemoryStore) -> None:
    secret = memory.add("ann", NewMemory("Ann's door code is 4711"))
    memory.add("bob", NewMemory("Bob has a cat"))
    with pytest.raises(UnknownMemory):
        memory.get("bob", secret.id)
    with pytest.raises(UnknownMemory):
        memory.delete("bob", secret.id)
    assert [e.text for e in memory.entries("bob")] == ["Bob has a cat"]
    assert memory.forget("bob") == 1
    assert [e.text for e in memory.entries("ann")] == ["Ann's door code is 4711"]


def test_an_update_invalidates_instead_of_overwriting(memory: MemoryStore,
                                                      clock: Clock) -> None:
    old = memory.add("ann", NewMemory("Ann lives in Oslo"))
    clock.now = T0 + timedelta(days=30)
    new = memory.update("ann", old.id, NewMemory("Ann lives in Bergen"), reason="moved")
    assert [e.text for e in memory.entries("ann")] == ["Ann lives in Bergen"]
    history = {e.id: e for e in memory.entries("ann", history=True)}
    assert history[old.id].invalidated_by == new.id and history[old.id].reason == "moved"
    assert history[new.id].supersedes == old.id
    with pytest.raises(InputError, match="already revised"):
        memory.update("ann", old.id, NewMemory("Ann lives in Tromsø"))
    memory.invalidate("ann", new.id, "the user said it is wrong")
    assert memory.entries("ann") == []
    memory.delete("ann", new.id)  # the whole chain goes
    assert memory.entries("ann", history=True) == []


def test_time_passes_and_expiry_deletes_for_real(memory: MemoryStore, clock: Clock) -> None:
    trip = memory.add("ann", NewMemory("Ann is going to Singapore in July",
                                       valid_from=datetime(2026, 7, 1, tzinfo=UTC),
                                       valid_to=datetime(2026, 8, 1, tzinfo=UTC)))
    memory.add("ann", NewMemory("Ann's temporary badge is B-17",
                                expires_at=datetime(2026, 6, 1, tzinfo=UTC)))
    assert len(memory.entries("ann")) == 2
    clock.now = datetime(2026, 8, 2, tzinfo=UTC)
    assert [e.text for e in memory.entries("ann")] == []  # the trip is past, the badge expired
    past = memory.get("ann", trip.id)
    assert not past.current(clock.now) and past.valid_to is not None
    assert memory.purge_expired() == 1
    assert [e.text for e in memory.entries("ann", history=True)] == [
        "Ann is going to Singapore in July"]


def test_deleting_a_conversation_deletes_what_was_derived_from_it(
        memory: MemoryStore, log: RelationalStore) -> None:
    cid = Engine(log, ScriptedModel()).run_turn("My name is Ann.").conversation_id
    memory.add("ann", NewMemory("The user is called Ann", conversation_id=cid))
    memory.add("ann", NewMemory("Ann prefers metric units"))
    log.delete_conversation(cid)
    assert [e.text for e in memory.entries("ann", history=True)] == ["Ann prefers metric units"]


def test_bad_entries_are_refused_and_write_nothing(memory: MemoryStore) -> None:
    for bad, message in [(NewMemory("   "), "needs text"),
                         (NewMemory("x" * 5000), "over the limit"),
                         (NewMemory("t", kind="rumour"), "kinds"),  # type: ignore[arg-type]
                         (NewMemory("t", conversation_id="c_missing"), "does not exist"),
                         (NewMemory("t", valid_from=T0, valid_to=T0), "ends before")]:
        with pytest.raises(InputError, match=message):
            memory.add("ann", bad)
    with pytest.raises(InputError, match="invalid user id"):
        memory.add(" ", NewMemory("t"))
    assert memory.entries("ann", history=True) == []


def test_add_many_adds_all_or_nothing(memory: MemoryStore) -> None:
    memory.add("ann", NewMemory("Ann skis"))
    good = NewMemory("Ann lives in Oslo")
    # refused while checking, and refused by the database halfway through the inserts
    for bad, message in [(NewMemory("x" * 5000), "entry 1: a memory entry is 5,000 bytes"),
                         (NewMemory("t", conversation_id="c_missing"), "does not exist")]:
        with pytest.raises(InputError, match=message):
            memory.add_many("ann", [good, bad, good])
        assert [e.text for e in memory.entries("ann", history=True)] == ["Ann skis"]
    with pytest.raises(InputError, match="invalid user id"):
        memory.add_many(" ", [good])
    added = memory.add_many("ann", [good, NewMemory("Ann prefers tea",
                                                    source=Source.IMPORTED)])
    assert [(e.text, e.trusted) for e in added] == [("Ann lives in Oslo", True),
                                                    ("Ann prefers tea", False)]
    assert sorted(e.text for e in memory.entries("ann")) == [
        "Ann lives in Oslo", "Ann prefers tea", "Ann skis"]
    assert memory.add_many("ann", []) == []


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(writes=st.lists(st.tuples(st.sampled_from(["a", "b", "a b", "A", "a%", "_"]),
                                 st.text(min_size=1, max_size=20).filter(str.strip)),
                       min_size=1, max_size=12))
def test_no_query_for_one_user_returns_another_users_entry(
        tmp_path_factory: pytest.TempPathFactory, writes: list[tuple[str, str]]) -> None:
    store = SQLiteStore(tmp_path_factory.mktemp("prop") / "t.db")
    try:
        memory = MemoryStore(store)
        owner = {memory.add(user, NewMemory(text, kind=MemoryKind.FACT)).id: user
                 for user, text in writes}
        recall = MemoryRecall(memory, threshold=0.0)  # everything that matches a word
        for user in {u for u, _ in writes} | {"c"}:
            for entry in memory.entries(user, history=True):
                assert owner[entry.id] == user == entry.user_id
            for _, text in writes:  # every text, asked by every user
                for found in recall.recall(user, text, k=50).memories:
                    assert owner[found.entry.id] == user == found.entry.user_id
            for entry_id, entry_owner in owner.items():
                if entry_owner != user:
                    with pytest.raises(UnknownMemory):
                        memory.get(user, entry_id)
    finally:
        store.close()


def test_forget_leaves_nothing_about_the_user_in_any_table(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    memory = MemoryStore(store)
    memory.add("zed-7f3a", NewMemory("zed-7f3a's passport number is P123"))
    memory.add("amy", NewMemory("Amy skis"))
    # the whole path: turns sent with the user, a job learned, one still pending, a recall
    engine = standard_engine(store, ScriptedModel(), recall=MemoryRecall(memory))
    turn = engine.run_turn("I live in Oslo.", user_id="zed-7f3a")
    MemoryWriter(store, memory).run()
    engine.run_turn("Where do I live? I work at the harbour office.", user_id="zed-7f3a",
                    conversation_id=turn.conversation_id)
    # the passport entry, the fact learned and the turn it was said in
    assert memory.forget("zed-7f3a") == 3
    assert MemoryWriter(store, memory).run() == 0  # nothing left to learn it all again
    assert memory.entries("zed-7f3a", history=True) == []
    store.close()
    conn = sqlite3.connect(tmp_path / "t.db")
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        for row in conn.execute(f"SELECT * FROM {table}"):  # noqa: S608 - names from the file
            assert "zed-7f3a" not in repr(row), table
