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
    (ItemKind.COMPACTION, {"summary": "s", "through_seq": True}),
    (ItemKind.NOTE, {"text": "t", "bad": {1, 2}}),
])
def test_items_with_the_wrong_content_are_refused(kind: ItemKind, content: dict) -> None:
    with pytest.raises(InputError):
        NewItem(kind, content)
