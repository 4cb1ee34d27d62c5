"""Re-verify a conversation from its stored bytes: hash chains, parent links, turn numbers."""

from __future__ import annotations

from dataclasses import dataclass

from threadline.calls import CallStatus
from threadline.items import HASH_PREFIX, ItemKind, chain_hash
from threadline.stores.base import Store


@dataclass(frozen=True, order=True)
class Problem:
    seq: int
    branch: str
    detail: str

    def to_json(self) -> dict[str, object]:
        return {"seq": self.seq, "branch": self.branch, "detail": self.detail}


def verify_conversation(store: Store, conversation_id: str) -> list[Problem]:
    """Every inconsistency found, in item order; an empty list means the log is intact."""
    problems: set[Problem] = set()
    for branch in store.branches(conversation_id):
        previous = None
        turn = 0
        for item in store.history(conversation_id, branch.name):
            found = []
            expected_parent: int | None = None if previous is None else previous.seq
            if item.parent_seq != expected_parent:
                found.append(f"parent is {item.parent_seq}, expected {expected_parent}")
            if not item.hash.startswith(HASH_PREFIX):
                found.append(f"hash uses an unknown algorithm: {item.hash.split(':')[0]!r}")
            elif item.hash != chain_hash(None if previous is None else previous.hash,
                                         item.kind, item.content):
                found.append("hash does not match the content and its parent's hash")
            turn += item.kind is ItemKind.USER
            if item.turn != turn:
                found.append(f"turn is {item.turn}, expected {turn}")
            problems.update(Problem(item.seq, item.branch, detail) for detail in found)
            previous = item
    for call in store.calls(conversation_id):
        if call.status is CallStatus.OK and call.reply_seq is None:
            problems.add(Problem(call.head_seq, call.branch,
                                 f"call {call.id} succeeded but has no reply item"))
    return sorted(problems)
