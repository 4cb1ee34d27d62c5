"""The Store contract, as tests any backend runs.

Subclass :class:`StoreConformance` in a test module and provide one fixture, ``make_store``:
a zero-argument callable that opens a new handle on one fresh, empty database each time it is
called (so tests can reopen the data, or use two handles as two replicas would)::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def make_store(self, tmp_path):
            return lambda: MyStore(tmp_path / "db")
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from threadline.calls import CallStatus, ModelCall, Rendering, SentRequest, Timings, Usage
from threadline.errors import (
    ClientMessageConflict,
    InputError,
    TurnSuperseded,
    UnknownBranch,
    UnknownCall,
    UnknownConversation,
    UnknownItem,
)
from threadline.items import ItemKind, NewItem, chain_hash, new_id
from threadline.stores.base import (
    MAIN,
    Commit,
    Generation,
    LeaseClaim,
    LeaseTaken,
    NewBranch,
    NewConversation,
    Store,
)
from threadline.stores.verify import verify_conversation

MakeStore = Callable[[], Store]
_T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _create(store: Store, *items: NewItem, system: str | None = None) -> str:
    conversation_id = new_id("c_")
    store.commit(Commit(conversation_id=conversation_id, created_at=_T0, expected_head=None,
                        create=NewConversation(conversation_id, system=system), items=items))
    return conversation_id


def _append(store: Store, conversation_id: str, *items: NewItem, branch: str = MAIN,
            at: datetime = _T0) -> list[Any]:
    head = store.head(conversation_id, branch)
    return store.commit(Commit(conversation_id=conversation_id, created_at=at, branch=branch,
                               expected_head=None if head is None else head.seq,
                               items=items)).items


def _call(conversation_id: str, head_seq: int, messages: list[dict[str, Any]], *,
          prompt: str | None = None, tokens: tuple[int, ...] | None = None,
          status: CallStatus = CallStatus.OK, branch: str = MAIN) -> ModelCall:
    return ModelCall(
        id=new_id("call_"), conversation_id=conversation_id, branch=branch, turn=1,
        head_seq=head_seq, reply_seq=None, status=status, model="test-model",
        request=SentRequest(model="test-model", messages=tuple(messages),
                            params={"temperature": 0.5},
                            rendering=None if prompt is None else Rendering.of(prompt, tokens)),
        response={"text": "ok"}, usage=Usage(10, 4, 2), timings=Timings(1.5, 3.25),
        started_at=_T0, error=None if status is CallStatus.OK else "boom")


class OpensStore:
    """The ``store`` fixture every conformance suite shares: a handle from ``make_store``,
    closed after the test."""

    @pytest.fixture
    def store(self, make_store: MakeStore) -> Iterator[Store]:
        store = make_store()
        yield store
        store.close()


class StoreConformance(OpensStore):
    """The behaviour every Store backend must show."""

    # -- conversations and items ---------------------------------------------------------

    def test_a_new_conversation_reads_back(self, store: Store) -> None:
        cid = _create(store, NewItem.user("hi"), system="be brief")
        conversation = store.conversation(cid)
        assert (conversation.id, conversation.system, conversation.created_at) == \
            (cid, "be brief", _T0)
        assert [b.name for b in store.branches(cid)] == [MAIN]
        summary = store.summary(cid)
        assert (summary.items, summary.turns, summary.branches, summary.calls) == (1, 1, 1, 0)
        assert summary.title == "hi"

    def test_items_chain_by_seq_parent_hash_and_turn(self, store: Store) -> None:
        cid = _create(store, NewItem.user("one"), NewItem.assistant("reply one"))
        _append(store, cid, NewItem.user("two"))
        _append(store, cid, NewItem.tool_call("t1", "search", {"q": "x"}),
                NewItem.tool_result("t1", "found"), NewItem.assistant("reply two"))
        items = store.history(cid)
        assert [i.seq for i in items] == [1, 2, 3, 4, 5, 6]
        assert [i.parent_seq for i in items] == [None, 1, 2, 3, 4, 5]
        assert [i.turn for i in items] == [1, 1, 2, 2, 2, 2]
        previous = None
        for item in items:
            assert item.hash == chain_hash(previous, item.kind, item.content)
            assert item.hash.startswith("b2:")
            previous = item.hash
        head = store.head(cid)
        assert head is not None and head.seq == 6 and head.text == "reply two"
        assert verify_conversation(store, cid) == []

    def test_content_round_trips_exactly(self, store: Store) -> None:
        texts = ["naïve café ☕ 🧵 — 中文", "nul\x00inside", "x" * 200_000, "  spaced\n\ttext  "]
        cid = _create(store, *[NewItem.user(t) for t in texts],
                      NewItem.tool_call("c", "f", {"nested": {"b": [1, 2.5, None, True]}}))
        items = store.history(cid)
        assert [i.text for i in items[:4]] == texts
        assert items[4].content["arguments"] == {"nested": {"b": [1, 2.5, None, True]}}

    def test_stale_head_writes_nothing(self, store: Store) -> None:
        cid = _create(store, NewItem.user("one"))
        with pytest.raises(TurnSuperseded):
            store.commit(Commit(conversation_id=cid, created_at=_T0, expected_head=None,
                                items=[NewItem.assistant("late")]))
        assert [i.seq for i in store.history(cid)] == [1]

    def test_a_commit_is_all_or_nothing(self, store: Store) -> None:
        cid = _create(store, NewItem.user("one", client_msg_id="m-1"))
        with pytest.raises(ClientMessageConflict):
            _append(store, cid, NewItem.assistant("partial"),
                    NewItem.user("dup", client_msg_id="m-1"))
        assert [i.text for i in store.history(cid)] == ["one"]
        with pytest.raises(UnknownConversation):
            store.commit(Commit(conversation_id="c_missing", created_at=_T0,
                                items=[NewItem.user("x")]))

    def test_client_message_ids_are_unique_and_found(self, store: Store) -> None:
        cid = _create(store, NewItem.user("first", client_msg_id="abc"))
        found = store.find_client_message("abc")
        assert found is not None and (found.conversation_id, found.seq) == (cid, 1)
        assert store.find_client_message("nope") is None
        other = _create(store, NewItem.user("elsewhere"))
        with pytest.raises(ClientMessageConflict):
            _append(store, other, NewItem.user("again", client_msg_id="abc"))

    def test_unknown_ids_raise_not_found(self, store: Store) -> None:
        cid = _create(store, NewItem.user("x"))
        for read in (lambda: store.conversation("c_nope"), lambda: store.history("c_nope"),
                     lambda: store.calls("c_nope"), lambda: store.summary("c_nope"),
                     lambda: store.delete_conversation("c_nope")):
            with pytest.raises(UnknownConversation):
                read()
        with pytest.raises(UnknownBranch):
            store.history(cid, "no-such-branch")
        for seq in (99, 0, -1, 2**70):  # out of any integer column's range too
            with pytest.raises(UnknownItem):
                store.item(cid, seq)
        with pytest.raises(UnknownCall):
            store.call("call_nope")

    # -- branches ------------------------------------------------------------------------

    def test_fork_leaves_the_original_intact(self, store: Store) -> None:
        cid = _create(store, NewItem.user("q1"), NewItem.assistant("a1"), NewItem.user("q2"),
                      NewItem.assistant("a2"))
        result = store.commit(Commit(conversation_id=cid, created_at=_T0, branch="edit",
                                     fork=NewBranch("edit", 2), expected_head=2,
                                     items=[NewItem.user("q2 edited")]))
        assert result.branch is not None and result.branch.parent == MAIN
        assert [i.text for i in store.history(cid, "edit")] == ["q1", "a1", "q2 edited"]
        assert [i.text for i in store.history(cid)] == ["q1", "a1", "q2", "a2"]
        edited = store.history(cid, "edit")[-1]
        assert (edited.branch, edited.parent_seq, edited.turn) == ("edit", 2, 2)
        assert verify_conversation(store, cid) == []

    def test_a_fresh_fork_heads_at_its_fork_point(self, store: Store) -> None:
        cid = _create(store, NewItem.user("q1"), NewItem.assistant("a1"))
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch="b", expected_head=1,
                            fork=NewBranch("b", 1)))
        head = store.head(cid, "b")
        assert head is not None and head.seq == 1
        _append(store, cid, NewItem.assistant("a1 again"), branch="b")
        assert [i.text for i in store.history(cid, "b")] == ["q1", "a1 again"]

    def test_forks_of_forks_inherit_the_right_prefix(self, store: Store) -> None:
        cid = _create(store, NewItem.user("1"), NewItem.assistant("2"), NewItem.user("3"))
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch="b", expected_head=2,
                            fork=NewBranch("b", 2), items=[NewItem.user("b4")]))
        _append(store, cid, NewItem.assistant("b5"), branch="b")
        _append(store, cid, NewItem.assistant("main6"))
        # fork "c" from an item "b" inherited from main
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch="c", expected_head=1,
                            fork=NewBranch("c", 1), items=[NewItem.assistant("c")]))
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch="d",
                            expected_head=5, fork=NewBranch("d", 5),
                            items=[NewItem.user("d")]))
        assert [i.text for i in store.history(cid, "b")] == ["1", "2", "b4", "b5"]
        assert [i.text for i in store.history(cid, "c")] == ["1", "c"]
        assert [i.text for i in store.history(cid, "d")] == ["1", "2", "b4", "b5", "d"]
        assert [i.text for i in store.history(cid)] == ["1", "2", "3", "main6"]
        assert verify_conversation(store, cid) == []

    def test_a_root_branch_shares_no_history(self, store: Store) -> None:
        cid = _create(store, NewItem.user("original first message"))
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch="r", expected_head=None,
                            fork=NewBranch("r", None), items=[NewItem.user("edited first")]))
        assert [i.text for i in store.history(cid, "r")] == ["edited first"]
        assert store.history(cid, "r")[0].parent_seq is None

    def test_bad_forks_are_refused_and_write_nothing(self, store: Store) -> None:
        cid = _create(store, NewItem.user("1"))
        for seq in (9, 2**70):
            with pytest.raises(UnknownItem):
                store.commit(Commit(conversation_id=cid, created_at=_T0, branch="x",
                                    expected_head=seq, fork=NewBranch("x", seq)))
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch="x", expected_head=1,
                            fork=NewBranch("x", 1)))
        with pytest.raises(InputError):
            store.commit(Commit(conversation_id=cid, created_at=_T0, branch="x",
                                expected_head=1, fork=NewBranch("x", 1)))
        assert [b.name for b in store.branches(cid)] == [MAIN, "x"]

    def test_a_failed_fork_leaves_no_branch_behind(self, store: Store) -> None:
        cid = _create(store, NewItem.user("1"), NewItem.assistant("2"))
        with pytest.raises(TurnSuperseded):
            store.commit(Commit(conversation_id=cid, created_at=_T0, branch="f",
                                fork=NewBranch("f", 1), expected_head=2,
                                items=[NewItem.user("x")]))
        with pytest.raises(UnknownBranch):
            store.history(cid, "f")
        with pytest.raises(UnknownBranch):
            store.commit(Commit(conversation_id=cid, created_at=_T0, branch="f",
                                expected_head=1, items=[NewItem.user("x")]))
        assert [b.name for b in store.branches(cid)] == [MAIN]

    # -- model calls ---------------------------------------------------------------------

    def test_a_call_is_recorded_with_its_reply_in_one_commit(self, store: Store) -> None:
        cid = _create(store, NewItem.user("q"))
        messages = [{"role": "user", "content": "q"}]
        call = _call(cid, 1, messages, prompt="<user>q", tokens=(5, 6, 7))
        result = store.commit(Commit(conversation_id=cid, created_at=_T0, expected_head=1,
                                     items=[NewItem.assistant("a")], call=call,
                                     call_reply_index=0))
        assert result.call is not None and result.call.reply_seq == 2
        stored = store.call(call.id)
        assert stored.request == call.request
        assert stored.request is not None and stored.request.exact_bytes() == b"<user>q"
        assert (stored.usage, stored.timings, stored.reply_seq, stored.status) == \
            (Usage(10, 4, 2), Timings(1.5, 3.25), 2, CallStatus.OK)
        listed = store.calls(cid)
        assert [c.id for c in listed] == [call.id] and listed[0].request is None

    def test_the_last_call_per_branch_comes_with_its_request(self, store: Store) -> None:
        cid = _create(store, NewItem.user("q"))
        assert store.last_call(cid) is None
        first = _call(cid, 1, [{"role": "user", "content": "q"}], prompt="q")
        store.commit(Commit(conversation_id=cid, created_at=_T0, check_head=False, call=first))
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch="b", expected_head=1,
                            fork=NewBranch("b", 1)))
        second = _call(cid, 1, [{"role": "user", "content": "q"}], prompt="q!", branch="b")
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch="b", check_head=False,
                            call=second))
        on_main, on_b, anywhere = (store.last_call(cid, MAIN), store.last_call(cid, "b"),
                                   store.last_call(cid))
        assert on_main is not None and on_main.id == first.id
        assert on_b is not None and on_b.request == second.request
        assert anywhere is not None and anywhere.id == second.id
        assert store.last_call(cid, "nope") is None

    def test_a_failed_call_is_recorded_without_items(self, store: Store) -> None:
        cid = _create(store, NewItem.user("q"))
        call = _call(cid, 1, [{"role": "user", "content": "q"}], status=CallStatus.FAILED)
        store.commit(Commit(conversation_id=cid, created_at=_T0, check_head=False, call=call))
        assert [i.seq for i in store.history(cid)] == [1]
        stored = store.call(call.id)
        assert (stored.status, stored.error, stored.reply_seq) == (CallStatus.FAILED, "boom",
                                                                    None)

    def test_a_generation_is_saved_as_it_streams_and_read_back(self,
                                                               make_store: MakeStore) -> None:
        store = make_store()
        cid = _create(store, NewItem.user("q"))
        assert store.generation("gen_missing") is None
        store.save_generation(Generation("gen_1", cid, "Hel"), _T0)
        assert store.generation("gen_1") == Generation("gen_1", cid, "Hel")
        store.save_generation(Generation("gen_1", cid, "Hello.", True, {"turn": 1}), _T0)
        assert store.generation("gen_1") == Generation("gen_1", cid, "Hello.", True, {"turn": 1})
        with pytest.raises(UnknownConversation):
            store.save_generation(Generation("gen_2", "c_missing", ""), _T0)
        store.delete_conversation(cid)
        assert store.generation("gen_1") is None  # deleted with its conversation

    def test_a_lease_is_exclusive_until_released_or_expired(self,
                                                            make_store: MakeStore) -> None:
        store = make_store()
        cid = _create(store, NewItem.user("q"))
        first = store.lease(cid, "a", 30.0, now=1000.0)
        assert first.granted and first.expires_at == 1030.0
        other = store.lease(cid, "b", 30.0, now=1010.0)
        assert (other.granted, other.holder, other.expires_at) == (False, "a", 1030.0)
        assert store.lease(cid, "a", 30.0, now=1020.0).expires_at == 1050.0  # renewed
        assert store.lease(cid, "b", 30.0, now=1051.0).granted  # a expired: never wedged
        store.release_lease(cid, "a")  # no longer a's: nothing happens
        assert not store.lease(cid, "a", 30.0, now=1052.0).granted
        store.release_lease(cid, "b")
        assert store.lease(cid, "a", 30.0, now=1053.0).granted

    def test_a_cancel_request_reaches_the_holder_only(self, make_store: MakeStore) -> None:
        store = make_store()
        cid = _create(store, NewItem.user("q"))
        assert store.request_cancel(cid, now=1000.0) is False  # nobody to ask
        store.lease(cid, "a", 30.0, now=1000.0)
        assert store.request_cancel(cid, now=1001.0) is True
        assert store.lease(cid, "a", 30.0, now=1002.0).cancel_requested
        store.release_lease(cid, "a")
        assert not store.lease(cid, "b", 30.0, now=1003.0).cancel_requested
        with pytest.raises(UnknownConversation):
            store.lease("c_missing", "a", 30.0, now=1000.0)

    def test_a_commit_takes_and_gives_back_the_lease_with_what_it_writes(
            self, make_store: MakeStore) -> None:
        store = make_store()
        cid = _create(store, NewItem.user("q"))
        assert store.lease_holder(cid, now=1000.0) is None
        taken = store.commit(Commit(conversation_id=cid, created_at=_T0, check_head=False,
                                    items=[NewItem.user("mine")],
                                    take_lease=LeaseClaim("a", 30.0, 1000.0)))
        assert [i.text for i in taken.items] == ["mine"]
        holder = store.lease_holder(cid, now=1001.0)
        assert holder is not None and (holder.holder, holder.expires_at) == ("a", 1030.0)
        before = store.history(cid)
        with pytest.raises(LeaseTaken) as busy:  # b's message waits: nothing is written
            store.commit(Commit(conversation_id=cid, created_at=_T0, check_head=False,
                                items=[NewItem.user("theirs")],
                                take_lease=LeaseClaim("b", 30.0, 1005.0)))
        assert busy.value.lease.holder == "a" and store.history(cid) == before
        assert store.renew_lease(cid, "a", 30.0, now=1010.0).expires_at == 1040.0
        assert not store.renew_lease(cid, "b", 30.0, now=1010.0).granted  # never b's
        store.commit(Commit(conversation_id=cid, created_at=_T0, check_head=False,
                            items=[NewItem.assistant("done")], release_lease="a"))
        assert store.lease_holder(cid, now=1011.0) is None
        assert not store.renew_lease(cid, "a", 30.0, now=1012.0).granted  # gone for good
        assert store.lease_holder(cid, now=1012.0) is None  # a renewal never takes it back
        store.commit(Commit(conversation_id=cid, created_at=_T0, check_head=False,
                            items=[NewItem.user("b's turn")],
                            take_lease=LeaseClaim("b", 30.0, 1013.0)))
        expired = store.lease_holder(cid, now=1044.0)  # past b's expiry: free
        assert expired is None and [i.text for i in store.history(cid)][-1] == "b's turn"

    def test_a_side_call_is_kept_but_is_never_the_last_turn_call(self,
                                                                 make_store: MakeStore) -> None:
        store = make_store()
        cid = _create(store, NewItem.user("q"))
        turn = _call(cid, 1, [{"role": "user", "content": "q"}])
        store.commit(Commit(conversation_id=cid, created_at=_T0, expected_head=1,
                            items=[NewItem.assistant("a")], call=turn, call_reply_index=0))
        side = replace(_call(cid, 2, [{"role": "user", "content": "list the rules"}]),
                       purpose="compaction")
        store.commit(Commit(conversation_id=cid, created_at=_T0, check_head=False, call=side))
        last = store.last_call(cid, MAIN)
        assert last is not None and last.id == turn.id
        assert [c.purpose for c in store.calls(cid)] == ["turn", "compaction"]
        assert store.call(side.id).request == side.request

    def test_every_request_in_a_long_chain_reads_back_exactly(self,
                                                              make_store: MakeStore) -> None:
        store = make_store()
        cid = _create(store, NewItem.user("turn 0"))
        messages: list[dict[str, Any]] = []
        recorded = []
        for turn in range(25):
            messages = messages + [{"role": "user", "content": f"turn {turn} ü"}]
            prompt = "".join(f"<{m['role']}>{m['content']}" for m in messages)
            tokens = tuple(range(len(prompt)))
            if turn % 7 == 6:  # a rewrite in the middle: the delta must not assume append-only
                messages = [{"role": "system", "content": "reset"}, *messages[-2:]]
                prompt, tokens = "reset" + prompt[-10:], tokens[::-1]
            head = store.head(cid)
            assert head is not None
            call = _call(cid, head.seq, messages, prompt=prompt, tokens=tokens)
            store.commit(Commit(conversation_id=cid, created_at=_T0, expected_head=head.seq,
                                items=[NewItem.assistant(f"reply {turn}")], call=call,
                                call_reply_index=0))
            recorded.append(call)
        store.close()
        reopened = make_store()  # nothing cached: every request is rebuilt from storage
        try:
            for call in reversed(recorded):
                assert reopened.call(call.id).request == call.request
        finally:
            reopened.close()

    # -- lifecycle -----------------------------------------------------------------------

    def test_delete_removes_a_conversation_and_nothing_else(self, store: Store) -> None:
        keep = _create(store, NewItem.user("keep me", client_msg_id="k"))
        gone = _create(store, NewItem.user("delete me", client_msg_id="g"))
        call = _call(gone, 1, [{"role": "user", "content": "delete me"}])
        store.commit(Commit(conversation_id=gone, created_at=_T0, expected_head=1,
                            items=[NewItem.assistant("a")], call=call, call_reply_index=0))
        store.delete_conversation(gone)
        with pytest.raises(UnknownConversation):
            store.conversation(gone)
        with pytest.raises(UnknownCall):
            store.call(call.id)
        assert store.find_client_message("g") is None
        assert [s.conversation.id for s in store.conversations()] == [keep]
        assert store.find_client_message("k") is not None

    def test_conversations_list_most_recent_first(self, store: Store) -> None:
        older = _create(store, NewItem.user("older"))
        newer = _create(store, NewItem.user("newer"))
        _append(store, older, NewItem.assistant("bump"), at=_T0 + timedelta(seconds=5))
        assert [s.conversation.id for s in store.conversations()] == [older, newer]
        assert [s.conversation.id for s in store.conversations(limit=1)] == [older]

    def test_a_conversation_keeps_its_owner_and_lists_by_it(self, store: Store) -> None:
        owned: dict[str | None, list[str]] = {}
        for owner in ("ann", "Ann", "an%", None, "ann"):
            cid = new_id("c_")
            store.commit(Commit(conversation_id=cid, created_at=_T0, expected_head=None,
                                create=NewConversation(cid, owner=owner)))
            owned.setdefault(owner, []).append(cid)
        assert store.conversation(owned["ann"][0]).owner == "ann"
        assert store.summary(owned[None][0]).conversation.owner is None
        for owner in ("ann", "Ann", "an%"):  # matched exactly: no case folding, no patterns
            assert sorted(s.conversation.id for s in store.conversations(owner=owner)) == \
                sorted(owned[owner])
        assert len(store.conversations(owner="ann", limit=1)) == 1
        assert store.conversations(owner="bob") == []
        assert len(store.conversations()) == 5  # no owner given: everyone's, and no one's

    def test_data_survives_reopening(self, make_store: MakeStore) -> None:
        first = make_store()
        cid = _create(first, NewItem.user("persist me"))
        first.close()
        second = make_store()
        try:
            assert [i.text for i in second.history(cid)] == ["persist me"]
        finally:
            second.close()

    def test_a_handle_sees_what_another_appended_forked_and_deleted(
            self, make_store: MakeStore) -> None:
        reader, writer = make_store(), make_store()
        try:
            cid = _create(writer, NewItem.user("one"))
            assert [i.text for i in reader.history(cid)] == ["one"]
            _append(writer, cid, NewItem.assistant("two"))
            _append(writer, cid, NewItem.user("three"))
            assert [i.text for i in reader.history(cid)] == ["one", "two", "three"]
            writer.commit(Commit(conversation_id=cid, created_at=_T0, branch="b",
                                 expected_head=2, fork=NewBranch("b", 2),
                                 items=[NewItem.user("three, edited")]))
            assert [i.text for i in reader.history(cid, "b")] == ["one", "two",
                                                                  "three, edited"]
            assert [i.text for i in reader.history(cid)] == ["one", "two", "three"]
            writer.delete_conversation(cid)
            # the reader still knows the branch: each write is refused all the same
            for late in (Commit(conversation_id=cid, created_at=_T0, expected_head=3,
                                items=[NewItem.note("late")]),
                         Commit(conversation_id=cid, created_at=_T0, check_head=False,
                                items=[NewItem.note("late")])):
                with pytest.raises(UnknownConversation):
                    reader.commit(late)
            with pytest.raises(UnknownConversation):
                reader.history(cid)
        finally:
            reader.close()
            writer.close()

    def test_a_conversation_as_read_is_the_row_its_history_read_brought(
            self, make_store: MakeStore) -> None:
        mine, other = make_store(), make_store()
        try:
            cid = _create(other, NewItem.user("one"), system="be brief")
            mine.history(cid)
            as_read = mine.conversation(cid, as_read=True)
            assert as_read == other.conversation(cid) and as_read.system == "be brief"
            other.delete_conversation(cid)  # another handle: a read says so, not the row held
            assert mine.conversation(cid, as_read=True) == as_read
            with pytest.raises(UnknownConversation):
                mine.history(cid)
            with pytest.raises(UnknownConversation):  # and the row is held no longer
                mine.conversation(cid, as_read=True)
            with pytest.raises(UnknownConversation):  # never read: read now
                mine.conversation("c_nope", as_read=True)
        finally:
            mine.close()
            other.close()

    def test_history_through_an_item_is_the_branch_as_it_was_then(
            self, make_store: MakeStore) -> None:
        mine, other = make_store(), make_store()
        try:
            cid = _create(mine, NewItem.user("one"))
            assert [i.text for i in mine.history(cid)] == ["one"]
            [reply] = _append(mine, cid, NewItem.assistant("two"))  # held, not read back
            assert [i.text for i in mine.history(cid, through=reply)] == ["one", "two"]
            assert mine.history(cid, through=reply)[-1] == other.history(cid)[-1]
            _append(other, cid, NewItem.user("three"))  # another handle moves the branch
            assert [i.text for i in mine.history(cid, through=reply)] == ["one", "two"]
            assert [i.text for i in mine.history(cid)] == ["one", "two", "three"]
            assert [i.text for i in mine.history(cid, through=reply)] == ["one", "two"]
            first = mine.history(cid)[0]
            assert [i.text for i in other.history(cid, through=first)] == ["one"]
            # what a handle's commits added reads as the log holds it
            [extra] = _append(mine, cid, NewItem.tool_call("c", "f", {"t": (1, 2)}))
            assert mine.history(cid, through=extra)[-1] == other.history(cid)[-1]
            assert mine.history(cid, through=extra)[-1].content["arguments"] == {"t": [1, 2]}
            # a fork's history through an item it inherited, and through its own
            mine.commit(Commit(conversation_id=cid, created_at=_T0, branch="b",
                               expected_head=1, fork=NewBranch("b", 1),
                               items=[NewItem.assistant("two, again")]))
            assert [i.text for i in mine.history(cid, "b", through=first)] == ["one"]
            own = other.history(cid, "b")[-1]
            assert [i.text for i in mine.history(cid, "b", through=own)] == ["one",
                                                                             "two, again"]
        finally:
            mine.close()
            other.close()

    def test_concurrent_writers_never_fork_a_branch(self, make_store: MakeStore) -> None:
        setup = make_store()
        cid = _create(setup, NewItem.user("start"))
        setup.close()
        writers, per_writer = 4, 15
        errors: list[BaseException] = []

        def write(n: int) -> None:
            store = make_store()  # one handle per writer, as separate replicas would have
            try:
                for k in range(per_writer):
                    while True:
                        try:
                            _append(store, cid, NewItem.note(f"w{n}-{k}"))
                            break
                        except TurnSuperseded:
                            continue
            except BaseException as err:  # surfaced below
                errors.append(err)
            finally:
                store.close()

        threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        check = make_store()
        try:
            items = check.history(cid)
            assert len(items) == 1 + writers * per_writer
            assert sorted(i.text for i in items if i.kind is ItemKind.NOTE) == sorted(
                f"w{n}-{k}" for n in range(writers) for k in range(per_writer))
            assert verify_conversation(check, cid) == []
        finally:
            check.close()
