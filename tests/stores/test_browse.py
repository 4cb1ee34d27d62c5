"""The log read a page at a time (``Store.browse``), on SQLite and PostgreSQL alike: walks
along a fork's lineage from either end, the calls of a few turns, conversation search with
its wildcards taken literally, and the running generation."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from threadline.engine import Engine
from threadline.items import ItemKind, NewItem
from threadline.models.scripted import ScriptedModel
from threadline.stores.base import Commit, Generation, NewBranch, NewConversation, Store
from threadline.stores.browse import UNBOUNDED, BrowseBackend, ConversationQuery, lineage
from threadline.stores.sqlite import SQLiteStore

AT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        opened: Store = SQLiteStore(tmp_path / "t.db")
    else:
        from threadline.stores.postgres import PostgresStore
        opened = PostgresStore(request.getfixturevalue("postgres_url"))
    yield opened
    opened.close()


def _browse(store: Store) -> BrowseBackend:
    assert store.browse is not None
    return store.browse


def _forked(store: Store) -> str:
    """main: items 1-6; b2 forks at 3 with items 7-8; main goes on with 9."""
    store.commit(Commit(conversation_id="c", created_at=AT, create=NewConversation("c"),
                        items=[NewItem.user(f"u{n}") if n % 2 else NewItem.assistant(f"a{n}")
                               for n in range(1, 7)]))
    store.commit(Commit(conversation_id="c", created_at=AT, branch="b2", expected_head=3,
                        fork=NewBranch("b2", 3),
                        items=[NewItem.assistant("again"), NewItem.note("n")]))
    store.commit(Commit(conversation_id="c", created_at=AT, check_head=False,
                        items=[NewItem.user("u7")]))
    return "c"


def test_a_walk_follows_the_lineage_from_either_end(store: Store) -> None:
    cid = _forked(store)
    line = lineage(store.branches(cid), "b2")
    assert line == [("b2", UNBOUNDED), ("main", 3)]
    browse = _browse(store)
    assert [i.seq for i in browse.items_before(cid, line, UNBOUNDED, 10)] == [8, 7, 3, 2, 1]
    assert [i.seq for i in browse.items_before(cid, line, 7, 2)] == [3, 2]
    assert [i.seq for i in browse.items_after(cid, line, 0, 10)] == [1, 2, 3, 7, 8]
    assert [i.seq for i in browse.items_after(cid, line, 2, 2)] == [3, 7]
    assert [i.seq for i in browse.items_of_kinds(cid, line, [ItemKind.NOTE])] == [8]
    assert browse.items_of_kinds(cid, line, [ItemKind.NOTE], after=8) == []
    main = lineage(store.branches(cid), "main")
    assert [i.seq for i in browse.items_before(cid, main, UNBOUNDED, 3)] == [9, 6, 5]


def test_the_calls_of_a_few_turns_from_either_end(store: Store) -> None:
    engine = Engine(store, ScriptedModel())
    cid = engine.run_turn("turn 1").conversation_id
    for n in range(2, 9):
        engine.run_turn(f"turn {n}", conversation_id=cid)
    browse = _browse(store)
    for from_newest in (True, False):
        found = browse.calls_in_turns(cid, "main", 3, 5, from_newest=from_newest)
        assert [c.turn for c in found] == [3, 4, 5]
        assert all(c.request is None for c in found)
    assert browse.calls_in_turns(cid, "main", 20, 30, from_newest=True) == []


def test_conversations_are_searched_sorted_and_paged(store: Store) -> None:
    for n, (cid, title, owner, said) in enumerate([
            ("c1", "100% done", "ann", 'she said "under_score"'),
            ("c2", "1000 done", "bob", "underXscore"),
            ("c3", None, "ann", "Roses in SHADE")]):
        store.commit(Commit(conversation_id=cid, created_at=AT + timedelta(minutes=n),
                            create=NewConversation(cid, title=title, owner=owner),
                            items=[NewItem.user(said)]))
    browse = _browse(store)

    def ids(**query: object) -> list[str]:
        return [s.conversation.id for s in browse.conversations(ConversationQuery(**query))]
    assert ids() == ["c3", "c2", "c1"]
    assert ids(oldest_first=True) == ["c1", "c2", "c3"]
    assert ids(title="0%") == ["c1"]              # % is a character, not a wildcard
    assert ids(text="under_score") == ["c1"]      # so is _
    assert ids(text='"under_') == ["c1"]          # a quote, as the stored JSON escapes it
    assert ids(text="shade") == ["c3"]            # any case
    assert ids(text="DONE") == ["c2", "c1"]       # in a title
    assert ids(owner="ann") == ["c3", "c1"]
    assert ids(limit=1, offset=1) == ["c2"]
    summary = browse.conversations(ConversationQuery(text="roses"))[0]
    assert (summary.turns, summary.items, summary.branches, summary.title) == \
        (1, 1, 1, "Roses in SHADE")


def test_the_running_generation(store: Store) -> None:
    _forked(store)
    browse = _browse(store)
    assert browse.running_generation("c") is None
    store.save_generation(Generation("gen_1", "c", "Hel"), AT)
    assert browse.running_generation("c") == Generation("gen_1", "c", "Hel")
    store.save_generation(Generation("gen_1", "c", "Hello", True, {"event": "done"}), AT)
    assert browse.running_generation("c") is None
