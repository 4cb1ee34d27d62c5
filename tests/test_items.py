from __future__ import annotations

import pytest

from threadline.errors import InputError
from threadline.items import ItemKind, NewItem, canonical_json, chain_hash, new_id


def test_canonical_json_is_sorted_compact_and_keeps_unicode() -> None:
    assert canonical_json({"b": 1, "a": ["é", None]}) == '{"a":["é",null],"b":1}'


def test_canonical_json_refuses_nan() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_chain_hash_is_tagged_and_depends_on_parent_kind_and_content() -> None:
    base = chain_hash(None, ItemKind.USER, {"text": "hi"})
    assert base.startswith("b2:") and len(base) == 3 + 64
    assert base == chain_hash(None, ItemKind.USER, {"text": "hi"})
    assert base != chain_hash("b2:" + "0" * 64, ItemKind.USER, {"text": "hi"})
    assert base != chain_hash(None, ItemKind.ASSISTANT, {"text": "hi"})
    assert base != chain_hash(None, ItemKind.USER, {"text": "hi "})


def test_ids_are_unique_and_time_ordered() -> None:
    ids = [new_id("c_") for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("c_") and len(i) == 28 for i in ids)
    assert ids[0][:12] <= ids[-1][:12]  # the millisecond prefix never goes backwards


@pytest.mark.parametrize(("kind", "content"), [
    (ItemKind.USER, {}),
    (ItemKind.USER, {"text": 3}),
    (ItemKind.TOOL_CALL, {"call_id": "c", "name": "f", "arguments": "not a dict"}),
    (ItemKind.COMPACTION, {"strategy": 3, "through_seq": 2}),
    (ItemKind.NOTE, {"text": "t", "bad": {1, 2}}),
])
def test_items_with_the_wrong_content_are_refused(kind: ItemKind, content: dict) -> None:
    with pytest.raises(InputError):
        NewItem(kind, content)


def test_chain_items_matches_what_a_store_appends(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from threadline.items import chain_items, utc_now
    from threadline.stores.base import Commit, NewConversation
    from threadline.stores.sqlite import SQLiteStore

    new = [NewItem.user("q"), NewItem.tool_call("t", "f", {"a": 1}),
           NewItem.tool_result("t", "out"), NewItem.assistant("a"), NewItem.user("q2")]
    store = SQLiteStore(tmp_path / "t.db")
    store.commit(Commit(conversation_id="c_1", created_at=utc_now(),
                        create=NewConversation("c_1"), items=new))
    stored = store.history("c_1")
    built = chain_items("c_1", new, created_at=stored[0].created_at)
    assert [(i.seq, i.parent_seq, i.turn, i.hash) for i in built] == \
        [(i.seq, i.parent_seq, i.turn, i.hash) for i in stored]
    store.close()
