"""View 2's branch tree: every branch of a conversation under the one it forked from, with
what kind of fork it looks like.

The log records a fork's place, not why it was made, so the kind is read from the items
around the fork point: a branch whose first item answers the user message it grew from is a
regeneration; one that grew from the item before a user message and starts with a user
message of its own is an edit of that message (an edit of the first message grows from
nothing: a new root that starts with a user message); anything else is a fork.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from threadline.inspector.deps import Inspector
from threadline.items import Branch, ItemKind
from threadline.stores.base import MAIN
from threadline.stores.browse import UNBOUNDED, lineage


@dataclass
class Node:
    branch: Branch
    kind: str                  # main | root | fork | edit | regenerate
    turn: int | None           # the turn the fork point is in
    children: list[Node] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.branch.name


def tree(inspector: Inspector, conversation_id: str) -> list[Node]:
    """The conversation's branches as a forest: roots (main first), each with its forks in
    the order they were made."""
    branches = inspector.store.branches(conversation_id)
    nodes = {b.name: _node(inspector, conversation_id, branches, b) for b in branches}
    roots: list[Node] = []
    for branch in branches:
        parent = nodes.get(branch.parent) if branch.parent is not None else None
        (parent.children if parent is not None else roots).append(nodes[branch.name])
    roots.sort(key=lambda n: (n.name != MAIN, n.branch.created_at))
    return roots


def _node(inspector: Inspector, conversation_id: str, branches: list[Branch],
          branch: Branch) -> Node:
    browse, cid = inspector.browse, conversation_id
    if branch.fork_seq is None or branch.parent is None:
        if branch.name == MAIN:
            return Node(branch, "main", None)
        # an edit of the first message forks from before it: a new root
        own = browse.items_after(cid, [(branch.name, UNBOUNDED)], 0, 1)
        edits = bool(own) and own[0].kind is ItemKind.USER and own[0].turn == 1
        return Node(branch, "edit" if edits else "root", 1 if edits else None)
    at = branch.fork_seq
    point = inspector.store.item(cid, at)
    own = browse.items_after(cid, [(branch.name, UNBOUNDED)], at, 1)
    first = own[0].kind if own else None
    if point.kind is ItemKind.USER and first is not ItemKind.USER:
        return Node(branch, "regenerate", point.turn)
    if first is ItemKind.USER:
        replaced = browse.items_after(cid, lineage(branches, branch.parent), at, 1)
        if replaced and replaced[0].kind is ItemKind.USER:
            return Node(branch, "edit", replaced[0].turn)
    return Node(branch, "fork", point.turn)
