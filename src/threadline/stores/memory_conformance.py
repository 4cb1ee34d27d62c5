"""The MemoryBackend contract, as tests any store that keeps memory runs.

Mix :class:`MemoryConformance` into a store's conformance test class (it uses the same
``make_store`` fixture as :class:`~threadline.stores.conformance.StoreConformance`)::

    class TestMyStore(StoreConformance, MemoryConformance):
        ...

The tests speak to ``store.memory`` directly, in stored records: what may become an entry
and how recall scores one are tested with ``threadline.memory``.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from threadline.errors import InputError
from threadline.items import ItemKind, NewItem, new_id
from threadline.stores.base import Commit, NewConversation, Store
from threadline.stores.conformance import MakeStore, OpensStore
from threadline.stores.memory import (
    JobClaim,
    MemoryBackend,
    MemoryEntry,
    MemoryKind,
    Source,
    UnknownMemory,
)

_T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
_DAY = timedelta(days=1)


def _entry(user_id: str, text: str, *, at: datetime = _T0, **fields: object) -> MemoryEntry:
    entry = MemoryEntry(user_id, new_id("mem_"), MemoryKind.FACT, text, Source.USER_STATED,
                        True, None, (), at)
    return replace(entry, **fields)  # type: ignore[arg-type]


def _conversation(store: Store, *texts: str) -> str:
    """A conversation with one user message per text (seqs 1, 2, ...)."""
    cid = new_id("c_")
    store.commit(Commit(conversation_id=cid, created_at=_T0, expected_head=None,
                        create=NewConversation(cid),
                        items=[NewItem(ItemKind.USER, {"text": t}) for t in texts]))
    return cid


def _ids(entries: list[MemoryEntry]) -> list[str]:
    return [e.id for e in entries]


class MemoryConformance(OpensStore):
    """The behaviour every store that keeps memory must show."""

    @pytest.fixture
    def memory(self, store: Store) -> MemoryBackend:
        backend = store.memory
        assert backend is not None, "this store keeps no memory: leave MemoryConformance out"
        return backend

    # -- entries -------------------------------------------------------------------------

    def test_an_entry_reads_back_exactly(self, store: Store, memory: MemoryBackend) -> None:
        cid = _conversation(store, "I live in Oslo", "until summer")
        full = _entry("ann", "Ann lives in Oslo", kind=MemoryKind.PROCEDURE,
                      source=Source.MODEL_INFERRED, trusted=False, conversation_id=cid,
                      item_seqs=(1, 2), valid_from=_T0 - _DAY, valid_to=_T0 + 30 * _DAY,
                      expires_at=_T0 + 60 * _DAY)
        earlier = _entry("ann", "Ann skis", at=_T0 - _DAY)
        same_time = replace(_entry("ann", "Ann rows"), id="mem_0")  # ties: by id
        memory.insert([full, earlier, same_time])
        assert memory.get("ann", full.id) == full
        assert _ids(memory.entries("ann")) == [earlier.id, same_time.id, full.id]

    def test_every_query_names_the_user(self, store: Store, memory: MemoryBackend) -> None:
        secret = _entry("ann", "Ann's door code is 4711")
        memory.insert([secret, _entry("bob", "Bob's door is blue")])
        with pytest.raises(UnknownMemory):
            memory.get("bob", secret.id)
        with pytest.raises(UnknownMemory):
            memory.delete("bob", secret.id)
        with pytest.raises(UnknownMemory):
            memory.invalidate("bob", secret.id, _T0, "not bob's")
        with pytest.raises(UnknownMemory):  # a replacement for bob cannot revise ann's entry
            memory.revise(secret.id, _entry("bob", "Bob's code is 1234"), "taken")
        assert memory.search("bob", ["door", "code"], at=_T0, limit=10)[0].text == \
            "Bob's door is blue"
        assert len(memory.search("bob", ["door", "code"], at=_T0, limit=10)) == 1
        assert memory.hits("bob", [secret.id]) == []
        memory.save_vectors("bob", "m", [(secret.id, b"\x01\x02")])  # not bob's: skipped
        assert memory.unembedded("ann") == [(secret.id, secret.text)]
        assert [e.text for e in memory.entries("bob")] == ["Bob's door is blue"]
        assert memory.forget("bob") == 1
        assert memory.get("ann", secret.id) == secret
        assert memory.entries("bob") == []

    def test_user_ids_are_matched_exactly(self, memory: MemoryBackend) -> None:
        for user in ("ann", "Ann", "an%", "a_n", "ann "):
            memory.insert([_entry(user, f"{user} keeps bees")])
        for user in ("ann", "Ann", "an%", "a_n", "ann "):
            assert [e.user_id for e in memory.entries(user)] == [user]
            assert [h.text for h in memory.search(user, ["bees"], at=_T0, limit=10)] == [
                f"{user} keeps bees"]

    def test_an_insert_of_many_is_all_or_nothing(self, memory: MemoryBackend) -> None:
        good, other = _entry("ann", "Ann skis"), _entry("ann", "Ann rows")
        broken = _entry("ann", "Ann said so", conversation_id="c_missing")
        with pytest.raises(InputError, match="does not exist"):
            memory.insert([good, broken, other])
        assert memory.entries("ann") == []
        memory.insert([good, other])
        assert sorted(_ids(memory.entries("ann"))) == sorted([good.id, other.id])
        memory.insert([])
        assert len(memory.entries("ann")) == 2

    def test_revise_invalidates_the_old_entry_and_links_both(self,
                                                          memory: MemoryBackend) -> None:
        old = _entry("ann", "Ann lives in Oslo")
        memory.insert([old])
        new = _entry("ann", "Ann lives in Bergen", at=_T0 + _DAY, supersedes=old.id)
        memory.revise(old.id, new, "moved")
        revised = memory.get("ann", old.id)
        assert (revised.invalidated_at, revised.invalidated_by, revised.reason) == (
            new.recorded_at, new.id, "moved")
        assert memory.get("ann", new.id) == new
        with pytest.raises(InputError, match="already revised"):
            memory.revise(old.id, _entry("ann", "Ann lives in Tromsø", supersedes=old.id), "x")
        with pytest.raises(InputError, match="already revised"):
            memory.invalidate("ann", old.id, _T0, "x")
        assert len(memory.entries("ann")) == 2  # the refused revision added nothing
        withdrawn = memory.invalidate("ann", new.id, _T0 + 2 * _DAY, "wrong")
        assert (withdrawn.invalidated_at, withdrawn.invalidated_by, withdrawn.reason) == (
            _T0 + 2 * _DAY, None, "wrong")
        assert withdrawn == memory.get("ann", new.id)

    def test_delete_removes_the_entries_an_entry_replaced(self,
                                                           memory: MemoryBackend) -> None:
        first, other = _entry("ann", "Ann lives in Oslo"), _entry("ann", "Ann skis")
        memory.insert([first, other])
        second = _entry("ann", "Ann lives in Bergen", supersedes=first.id)
        memory.revise(first.id, second, "moved")
        third = _entry("ann", "Ann lives in Tromsø", supersedes=second.id)
        memory.revise(second.id, third, "moved again")
        memory.delete("ann", second.id)  # with what it replaced, not what replaced it
        assert sorted(_ids(memory.entries("ann"))) == sorted([other.id, third.id])
        memory.delete("ann", third.id)
        assert _ids(memory.entries("ann")) == [other.id]
        with pytest.raises(UnknownMemory):
            memory.delete("ann", third.id)

    def test_forget_removes_entries_vectors_and_jobs(self, store: Store,
                                                     memory: MemoryBackend) -> None:
        cid = _conversation(store, "I skate", "I row")
        ann, bob = _entry("ann", "Ann skates"), _entry("bob", "Bob rows")
        memory.insert([ann, _entry("ann", "Ann sings"), bob])
        memory.save_vectors("ann", "m", [(ann.id, b"\x01" * 8)])
        memory.save_vectors("bob", "m", [(bob.id, b"\x02" * 8)])
        memory.enqueue(cid, 1, "ann")
        memory.enqueue(cid, 2, "bob")
        assert memory.forget("ann") == 2
        assert memory.entries("ann") == [] and memory.vectors("ann", _T0) == []
        assert [(j.seq, j.user_id) for j in memory.jobs()] == [(2, "bob")]
        assert memory.vectors("bob", _T0) == [(bob.id, b"\x02" * 8)]
        assert memory.forget("ann") == 0

    def test_purge_deletes_only_what_has_expired(self, memory: MemoryBackend) -> None:
        gone = [_entry("ann", "Ann's badge is B-1", expires_at=_T0 - _DAY),
                _entry("bob", "Bob's badge is B-2", expires_at=_T0)]  # at the moment: expired
        kept = [_entry("ann", "Ann's badge is B-3", expires_at=_T0 + timedelta(seconds=1)),
                _entry("ann", "Ann skis"),
                _entry("bob", "Bob's trip is over", valid_to=_T0 - _DAY)]  # past, not expired
        memory.insert([*gone, *kept])
        assert memory.purge_expired(_T0) == 2
        assert sorted(_ids(memory.entries("ann") + memory.entries("bob"))) == sorted(
            _ids(kept))
        assert memory.purge_expired(_T0) == 0

    # -- recall --------------------------------------------------------------------------

    def test_search_finds_only_entries_current_at_the_moment_asked(
            self, memory: MemoryBackend) -> None:
        current = _entry("ann", "Ann keeps bees on the roof")
        later = _entry("ann", "Ann keeps bees until spring", expires_at=_T0 + 10 * _DAY)
        expired = _entry("ann", "Ann kept bees in a box", expires_at=_T0 + _DAY)
        past = _entry("ann", "Ann kept bees last year", valid_to=_T0 + _DAY)
        revised = _entry("ann", "Ann keeps bees in the garden")
        memory.insert([current, later, expired, past, revised])
        memory.revise(revised.id, _entry("ann", "Ann keeps wasps", supersedes=revised.id), "x")
        now = _T0 + 2 * _DAY
        assert {h.id for h in memory.search("ann", ["bees"], at=now, limit=10)} == {
            current.id, later.id}
        assert {h.id for h in memory.search("ann", ["bees"], at=_T0, limit=10)} == {
            current.id, later.id, expired.id, past.id}  # earlier, those still held
        assert memory.search("ann", ["bees"], at=now + 30 * _DAY, limit=10)[0].id == \
            current.id
        assert len(memory.search("ann", ["bees", "roof"], at=_T0, limit=2)) == 2
        assert memory.search("ann", ["hornets"], at=_T0, limit=10) == []

    def test_turns_said_are_the_users_current_turns_of_a_conversation_in_a_window(
            self, store: Store, memory: MemoryBackend) -> None:
        cid, other = _conversation(store, "a", "b", "c", "d"), _conversation(store, "e")

        def turn(user: str, seq: int, at: datetime, conversation: str = cid,
                 **fields: object) -> MemoryEntry:
            return _entry(user, f"said {seq}", at=at, kind=MemoryKind.TURN,
                          conversation_id=conversation, item_seqs=(seq,), **fields)

        first, second = turn("ann", 1, _T0), turn("ann", 3, _T0 + timedelta(minutes=5))
        withdrawn = turn("ann", 4, _T0 + timedelta(minutes=6))
        memory.insert([first, second, withdrawn, turn("bob", 2, _T0),  # another user's
                       turn("ann", 1, _T0, other),                      # another conversation
                       turn("ann", 2, _T0 + _DAY),                      # outside the window
                       _entry("ann", "a fact", at=_T0, conversation_id=cid, item_seqs=(1,)),
                       turn("ann", 4, _T0, expires_at=_T0 + timedelta(seconds=1))])
        memory.invalidate("ann", withdrawn.id, _T0 + timedelta(minutes=7), "taken back")
        now = _T0 + timedelta(hours=1)
        said = memory.turns_said("ann", [(cid, _T0 - timedelta(hours=1), now)], at=now)
        assert _ids(said) == [first.id, second.id]
        assert _ids(memory.turns_said("ann", [(cid, _T0 + timedelta(minutes=1), now)],
                                      at=now)) == [second.id]
        # several windows at once, oldest first; none at all reads nothing
        both = memory.turns_said("ann", [(other, _T0, now), (cid, _T0 + _DAY, now + _DAY)],
                                 at=now + _DAY)
        assert [(e.conversation_id, e.item_seqs) for e in both] == [(other, (1,)), (cid, (2,))]
        assert memory.turns_said("ann", [], at=now) == []
        assert memory.turns_said("carl", [(cid, _T0, now)], at=now) == []

    def test_a_hit_is_light_and_decodes_to_its_entry(self, memory: MemoryBackend) -> None:
        entry = _entry("ann", "Ann grows tomatoes", source=Source.TOOL_RETURNED, trusted=False,
                       item_seqs=(3,), valid_to=_T0 + _DAY)
        memory.insert([entry])
        [hit] = memory.search("ann", ["tomatoes"], at=_T0, limit=5)
        assert (hit.id, hit.text, hit.trusted) == (entry.id, entry.text, False)
        assert hit.entry() == entry

    def test_hits_come_in_the_order_asked(self, memory: MemoryBackend) -> None:
        a, b, c = (_entry("ann", f"Ann likes {x}") for x in ("tea", "jazz", "snow"))
        memory.insert([a, b, c])
        assert [h.id for h in memory.hits("ann", [c.id, "mem_missing", a.id])] == [c.id, a.id]
        assert memory.hits("ann", []) == []

    # -- embeddings ----------------------------------------------------------------------

    def test_vectors_are_kept_by_entry_and_deleted_with_it(self,
                                                           memory: MemoryBackend) -> None:
        a, b = _entry("ann", "Ann skates"), _entry("ann", "Ann sings")
        expired = _entry("ann", "Ann rows", expires_at=_T0)
        memory.insert([a, b, expired])
        assert sorted(memory.unembedded("ann")) == sorted(
            [(a.id, a.text), (b.id, b.text), (expired.id, expired.text)])
        memory.save_vectors("ann", "m", [(a.id, b"\x00\x01" * 4), (expired.id, b"\x03" * 8),
                                         ("mem_gone", b"\x02" * 8)])
        memory.save_vectors("ann", "m", [(a.id, b"\xff" * 8)])  # it has one: kept as it was
        assert memory.unembedded("ann") == [(b.id, b.text)]
        assert memory.vectors("ann", _T0) == [(a.id, b"\x00\x01" * 4)]  # current ones only
        memory.delete("ann", a.id)
        assert memory.vectors("ann", _T0 - _DAY) == [(expired.id, b"\x03" * 8)]
        memory.insert([replace(a, text="Ann skates again")])  # the same key, a new entry
        assert (a.id, "Ann skates again") in memory.unembedded("ann")

    # -- the writer's queue --------------------------------------------------------------

    def test_an_item_is_queued_once(self, store: Store, memory: MemoryBackend) -> None:
        cid = _conversation(store, "I skate", "I row")
        memory.enqueue(cid, 2, "ann")
        memory.enqueue(cid, 1, "ann")
        memory.enqueue(cid, 2, "ann")
        assert [(j.conversation_id, j.seq, j.user_id, j.status, j.attempts, j.decisions,
                 j.error) for j in memory.jobs()] == [(cid, 1, "ann", "pending", 0, None, None),
                                                      (cid, 2, "ann", "pending", 0, None, None)]

    def test_a_claim_is_exclusive_until_it_expires(self, store: Store,
                                                   memory: MemoryBackend) -> None:
        cid = _conversation(store, "I skate", "I row", "I sing")
        for seq in (1, 2, 3):
            memory.enqueue(cid, seq, "ann")
        assert memory.claim(100.0, 160.0, limit=2) == [JobClaim(cid, 1, "ann"),
                                                      JobClaim(cid, 2, "ann")]
        assert memory.claim(150.0, 210.0, limit=10) == [JobClaim(cid, 3, "ann")]
        assert memory.claim(159.0, 219.0, limit=10) == []  # all held
        assert [c.seq for c in memory.claim(161.0, 221.0, limit=10)] == [1, 2]  # expired
        assert [j.attempts for j in memory.jobs()] == [2, 2, 1]

    def test_concurrent_claims_never_take_one_job_twice(self, make_store: MakeStore,
                                                        store: Store) -> None:
        cid = _conversation(store, *(f"I like {n}" for n in range(12)))
        queue = store.memory
        assert queue is not None
        for seq in range(1, 13):
            queue.enqueue(cid, seq, "ann")
        handles = [make_store() for _ in range(3)]
        taken: list[list[JobClaim]] = [[] for _ in handles]
        start = threading.Barrier(len(handles))

        def worker(n: int) -> None:
            backend = handles[n].memory
            assert backend is not None
            start.wait()
            for _ in range(20):  # more than enough rounds for 12 jobs
                taken[n] += backend.claim(100.0, 160.0, limit=2)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(len(handles))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for handle in handles:
            handle.close()
        seqs = sorted(c.seq for claims in taken for c in claims)
        assert seqs == list(range(1, 13))  # each job once, by one of them
        assert {j.attempts for j in queue.jobs()} == {1}

    def test_failures_are_counted_until_the_job_fails(self, store: Store,
                                                      memory: MemoryBackend) -> None:
        cid = _conversation(store, "I skate")
        memory.enqueue(cid, 1, "ann")
        assert memory.claim(100.0, 160.0, limit=5) == [JobClaim(cid, 1, "ann")]
        memory.fail(cid, 1, "RuntimeError: boom", max_attempts=2)
        [job] = memory.jobs("pending")
        assert (job.attempts, job.error) == (1, "RuntimeError: boom")
        assert memory.claim(101.0, 161.0, limit=5) == [JobClaim(cid, 1, "ann")]  # freed
        memory.fail(cid, 1, "RuntimeError: again", max_attempts=2)
        assert memory.jobs("pending") == [] and memory.claim(500.0, 560.0, limit=5) == []
        [failed] = memory.jobs("failed")
        assert (failed.status, failed.attempts, failed.error) == (
            "failed", 2, "RuntimeError: again")

    def test_a_finished_job_keeps_its_decisions(self, store: Store,
                                                memory: MemoryBackend) -> None:
        cid = _conversation(store, "I skate", "I row")
        memory.enqueue(cid, 1, "ann")
        memory.enqueue(cid, 2, "ann")
        memory.claim(100.0, 160.0, limit=5)
        decisions = [{"text": "I skate", "decision": "ADD", "entry": "mem_1",
                      "reason": "a user_stated fact – ünïcode"}]
        memory.finish(cid, 1, decisions)
        [done] = memory.jobs("done")
        assert (done.seq, done.status, done.decisions, done.error) == (1, "done", decisions,
                                                                      None)
        assert [j.seq for j in memory.jobs("pending")] == [2]
        assert [c.seq for c in memory.claim(200.0, 260.0, limit=5)] == [2]  # done stays done
        assert done.to_json()["decisions"] == decisions
