"""The transcript-hash contract (``Store.matching_messages`` and ``Store.transcript``), as
tests any backend runs: mix :class:`TranscriptConformance` into a test class that provides
``make_store``, as for :class:`~threadline.stores.conformance.StoreConformance`."""

from __future__ import annotations

from datetime import UTC, datetime

from threadline.items import NewItem, new_id, transcript_hash, transcript_root
from threadline.stores.base import MAIN, Commit, NewBranch, NewConversation, Store
from threadline.stores.conformance import OpensStore

_T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _chain(system: str | None, *messages: tuple[str, str]) -> list[str]:
    out, current = [], transcript_root(system)
    for role, text in messages:
        current = transcript_hash(current, role, text)
        out.append(current)
    return out


def _create(store: Store, *items: NewItem, system: str | None = None,
            owner: str | None = None, cid: str | None = None) -> str:
    cid = cid or new_id("c_")
    store.commit(Commit(conversation_id=cid, created_at=_T0, expected_head=None,
                        create=NewConversation(cid, system=system, owner=owner), items=items))
    return cid


class TranscriptConformance(OpensStore):
    def test_messages_chain_over_the_system_prompt_and_what_was_said(self,
                                                                     store: Store) -> None:
        cid = _create(store, NewItem.user("hi"), NewItem.note("not a message"),
                      NewItem.assistant("hello"), system="be brief")
        hi, hello = _chain("be brief", ("user", "hi"), ("assistant", "hello"))
        assert [store.transcript(cid, seq) for seq in (1, 2, 3)] == [hi, hi, hello]
        found = store.matching_messages([hi, hello])
        assert sorted((m.transcript, m.seq) for m in found) == sorted([(hi, 1), (hello, 3)])
        assert {m.conversation_id for m in found} == {cid}
        assert _chain(None, ("user", "hi"))[0] != hi  # another system prompt, another chain

    def test_later_commits_and_forks_carry_the_chain_on(self, store: Store) -> None:
        cid = _create(store, NewItem.user("a"))
        store.commit(Commit(conversation_id=cid, created_at=_T0, expected_head=1,
                            items=[NewItem.assistant("b")]))
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch="other",
                            fork=NewBranch("other", 1), expected_head=1,
                            items=[NewItem.assistant("c")]))
        a, b = _chain(None, ("user", "a"), ("assistant", "b"))
        c = transcript_hash(a, "assistant", "c")
        assert [store.transcript(cid, seq) for seq in (1, 2, 3)] == [a, b, c]
        assert [(m.seq, m.branch) for m in store.matching_messages([c])] == [(3, "other")]
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch="root",
                            fork=NewBranch("root", None), expected_head=None,
                            items=[NewItem.user("a")]))
        assert store.transcript(cid, 4) == a  # a new root starts from the system prompt again

    def test_matching_finds_every_conversation_or_only_the_one_asked(self,
                                                                      store: Store) -> None:
        one = _create(store, NewItem.user("same words"))
        two = _create(store, NewItem.user("same words"))
        digest = _chain(None, ("user", "same words"))[0]
        assert {m.conversation_id for m in store.matching_messages([digest])} == {one, two}
        assert [m.conversation_id for m in store.matching_messages(
            [digest], conversation_id=two)] == [two]
        assert store.matching_messages(["b2:" + "0" * 64]) == []
        assert store.matching_messages([]) == []

    def test_matching_keeps_to_one_owner_and_newest_first(self, store: Store) -> None:
        # ids in time order, as new_id makes them across milliseconds (within one, at random)
        ann = _create(store, NewItem.user("hello"), owner="ann", cid="c_1")
        nobody = _create(store, NewItem.user("hello"), cid="c_2")
        bob = _create(store, NewItem.user("hello"), owner="bob", cid="c_3")
        digest = _chain(None, ("user", "hello"))
        assert [m.conversation_id for m in store.matching_messages(digest)] == [bob, nobody,
                                                                                 ann]
        assert [m.conversation_id for m in store.matching_messages(digest, limit=1)] == [bob]
        assert [m.conversation_id for m in store.matching_messages(
            digest, user_id="ann")] == [ann]
        assert store.matching_messages(digest, user_id="carol") == []

    def test_many_hashes_at_once(self, store: Store) -> None:
        said = [("user" if n % 2 == 0 else "assistant", f"m{n}") for n in range(1_200)]
        cid = _create(store, *(NewItem.user(t) if r == "user" else NewItem.assistant(t)
                               for r, t in said))
        found = store.matching_messages(_chain(None, *said))
        assert sorted(m.seq for m in found) == list(range(1, 1_201))
        assert {m.conversation_id for m in found} == {cid}
        assert store.transcript(cid, 99_999) is None

    def test_deleted_conversations_match_nothing(self, store: Store) -> None:
        cid = _create(store, NewItem.user("gone"))
        store.delete_conversation(cid)
        assert store.matching_messages(_chain(None, ("user", "gone"))) == []

    def test_rows_from_before_transcripts_are_filled_in(self, store: Store) -> None:
        cid = _create(store, NewItem.user("old"), NewItem.assistant("row"), system="s")
        expected = [store.transcript(cid, seq) or "" for seq in (1, 2)]
        with store._session(write=True) as db:  # type: ignore[attr-defined]
            db.run("UPDATE items SET transcript = NULL WHERE conversation_id = ?", (cid,))
        assert store.transcript(cid, 1) is None
        assert store.fill_transcripts() == 1  # type: ignore[attr-defined]
        assert [store.transcript(cid, seq) for seq in (1, 2)] == expected
        with store._session(write=True) as db:  # type: ignore[attr-defined]
            db.run("UPDATE items SET transcript = NULL WHERE conversation_id = ?", (cid,))
        store.commit(Commit(conversation_id=cid, created_at=_T0, branch=MAIN,
                            check_head=False, items=[NewItem.user("new")]))
        assert store.transcript(cid, 3) == transcript_hash(expected[1], "user", "new")
