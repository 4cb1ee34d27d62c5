"""Placing a resent history at scale: one indexed lookup finds it among 10,000 stored
conversations, and the lookup never scans the items table."""

from __future__ import annotations

from pathlib import Path

from threadline.interop.resent import place, resent_from, settle
from threadline.items import NewItem, new_id, utc_now
from threadline.settings import Durability
from threadline.stores.base import Commit, NewConversation
from threadline.stores.sqlite import SQLiteStore


def _said(n: int) -> list[tuple[str, str]]:
    # every conversation opens with the same words: only the replies tell them apart
    return [("user", "hello"), ("assistant", f"reply number {n}"), ("user", "thanks")]


def test_a_history_is_found_among_ten_thousand_conversations(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "many.db", durability=Durability.OFF)
    ids = []
    for n in range(10_000):
        cid = new_id("c_")
        items = [NewItem.user(t) if r == "user" else NewItem.assistant(t) for r, t in _said(n)]
        store.commit(Commit(conversation_id=cid, created_at=utc_now(), expected_head=None,
                            create=NewConversation(cid, system="shared"), items=items))
        ids.append(cid)
    try:
        sent = resent_from([("system", "shared"), *_said(7_321),
                            ("assistant", "you're welcome"), ("user", "new")], max_bytes=4096)
        placement = place(store, sent)
        # the log holds three of the four: it forks the right one after "thanks"
        assert (placement.how, placement.conversation_id, placement.matched,
                placement.fork_from) == ("forked", ids[7_321], 3, 3)
        cid, branch = settle(store, placement)
        assert [i.text for i in store.history(cid, branch)][-1] == "you're welcome"
        exact = resent_from([("system", "shared"), *_said(42), ("user", "more")],
                            max_bytes=4096)
        assert place(store, exact).how == "continued"
        assert place(store, exact).conversation_id == ids[42]
        with store._session() as db:
            plan = " ".join(str(row[-1]) for row in db.all(
                "EXPLAIN QUERY PLAN SELECT transcript, conversation_id, seq, branch FROM items"
                " WHERE transcript IN (?, ?) AND kind IN ('user_message', 'assistant_message')",
                ("a", "b")))
        assert "items_by_transcript" in plan and "SCAN" not in plan, plan
    finally:
        store.close()


def test_one_message_after_the_system_prompt_is_a_new_conversation(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    try:
        placement = place(store, resent_from([("system", "s"), ("user", "hi")],
                                             max_bytes=100))
        assert (placement.how, placement.conversation_id, placement.system) == ("new", None,
                                                                                "s")
        assert store.conversations() == []  # placing writes nothing
    finally:
        store.close()
