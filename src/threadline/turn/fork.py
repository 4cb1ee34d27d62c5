"""Forks: a new branch growing from an earlier item, the original left intact.

An edit or a regeneration is a fork (the log is append-only): the new branch shares every item
up to the fork point with its parent, and so does its cached prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from threadline.errors import InputError
from threadline.items import Branch, NewItem, utc_now
from threadline.stores.base import Commit, NewBranch, Store


def fork(store: Store, conversation_id: str, from_seq: int | None, name: str | None = None,
         *, clock: Callable[[], datetime] = utc_now, items: Sequence[NewItem] = ()) -> Branch:
    """Create a branch growing from item ``from_seq`` (named b2, b3, … unless ``name``),
    with ``items`` appended to it in the same commit. With ``from_seq`` None the branch
    starts empty: a new root in the same conversation."""
    for _ in range(3):
        branch_name = name or f"b{len(store.branches(conversation_id)) + 1}"
        if from_seq is not None:
            store.item(conversation_id, from_seq)  # raises UnknownItem
        try:
            result = store.commit(Commit(
                conversation_id=conversation_id, created_at=clock(), branch=branch_name,
                fork=NewBranch(branch_name, from_seq), expected_head=from_seq, items=items))
        except InputError:
            if name is not None:
                raise
            continue  # a concurrent fork took the generated name
        assert result.branch is not None
        return result.branch
    raise InputError("could not choose a free branch name", hint="pass a name")
