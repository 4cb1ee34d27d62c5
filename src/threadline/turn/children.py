"""A conversation's children as its log records them: which it started, what each cost, and
each one's log for the parent that asks (the ``delegation_log`` tool)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from threadline.errors import InputError, UnknownConversation
from threadline.items import Item, ItemKind
from threadline.stores.base import Store
from threadline.turn.delegate import DELEGATE, child_id, parent_of
from threadline.turn.tools import idempotency_key


def spent(store: Store, conversation_id: str) -> tuple[int, int, int, int]:
    """Calls, prompt, cached and output tokens of a conversation and its descendants (whose
    totals its delegation results record)."""
    calls = store.calls(conversation_id)
    total = [len(calls), sum(c.usage.prompt_tokens for c in calls),
             sum(c.usage.cached_tokens for c in calls),
             sum(c.usage.completion_tokens for c in calls)]
    for found in delegations(store, conversation_id):
        if found.details is not None:
            for i, key in enumerate(("calls", "prompt_tokens", "cached_tokens",
                                     "output_tokens")):
                total[i] += int(found.details[key])
    return total[0], total[1], total[2], total[3]


@dataclass(frozen=True)
class Child:
    """A child conversation as its parent's log knows it: where it was asked for, and the
    recorded outcome (``details``: None while it runs, or if it was interrupted)."""

    child_id: str
    agent: str
    branch: str
    turn: int
    call_id: str | None
    details: Mapping[str, Any] | None
    error: str | None = None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "failed"
        return "unfinished" if self.details is None else "done"

    def to_json(self) -> dict[str, Any]:
        return {"child": self.child_id, "agent": self.agent, "branch": self.branch,
                "turn": self.turn, "call_id": self.call_id, "status": self.status,
                "error": self.error, **({} if self.details is None else {
                    k: self.details[k] for k in ("calls", "prompt_tokens", "cached_tokens",
                                                 "output_tokens", "truncated")})}


def delegations(store: Store, conversation_id: str) -> list[Child]:
    """Every child a conversation started, on any branch, in the order they were asked for:
    from its delegate calls (with their results, where recorded) and the notes a delegation
    from code leaves."""
    seen: dict[int, Item] = {}
    for branch in store.branches(conversation_id):
        for item in store.history(conversation_id, branch.name):
            seen.setdefault(item.seq, item)
    items = [seen[seq] for seq in sorted(seen)]
    results = {(i.branch, i.content["call_id"]): i for i in items
               if i.kind is ItemKind.TOOL_RESULT and i.content.get("tool") == DELEGATE}
    out = []
    for item in items:
        if item.kind is ItemKind.TOOL_CALL and item.content["name"] == DELEGATE:
            call_id = item.content["call_id"]
            result = _result_for(results, item)
            details = None if result is None else result.content.get("details")
            error = None
            if result is not None and details is None:
                error = str(result.content["output"])[:200]
            out.append(Child(child_id(idempotency_key(conversation_id, item.turn, call_id)),
                             str(item.content["arguments"].get("agent", "")), item.branch,
                             item.turn, call_id, details, error))
        elif item.kind is ItemKind.NOTE and "delegation" in item.content:
            details = item.content["delegation"]
            out.append(Child(details["child"], details["agent"], item.branch, item.turn,
                             None, details))
    return out


def _result_for(results: Mapping[tuple[str, str], Item], call: Item) -> Item | None:
    found = results.get((call.branch, call.content["call_id"]))
    if found is None:  # a result recorded on a branch forked after the call
        found = next((r for (_, cid), r in results.items()
                      if cid == call.content["call_id"] and r.seq > call.seq), None)
    return found


def child_log(store: Store, parent_id: str, child: str, limit_chars: int) -> str:
    """The child's whole log as text, for the parent that started it (and no one else)."""
    try:
        conversation = store.conversation(child)
    except UnknownConversation:
        raise InputError(f"there is no sub-agent conversation {child!r}") from None
    link = parent_of(conversation)
    if link is None or link.conversation_id != parent_id:
        raise InputError(f"{child!r} is not a sub-agent conversation of this one")
    lines = []
    for item in store.history(child):
        content = item.content
        if item.kind in (ItemKind.USER, ItemKind.ASSISTANT):
            lines.append(f"[{item.seq}] {item.kind.value.split('_')[0]}: {content['text']}")
        elif item.kind is ItemKind.TOOL_CALL:
            lines.append(f"[{item.seq}] tool call {content['name']}"
                         f"({json.dumps(content['arguments'], ensure_ascii=False)})")
        elif item.kind is ItemKind.TOOL_RESULT:
            lines.append(f"[{item.seq}] tool result: {content['output']}")
    text = "\n".join(lines)
    return text if len(text) <= limit_chars else text[:limit_chars] + "\n[log cut]"


def descendants(store: Store, conversation_id: str) -> list[str]:
    """The ids of every conversation below this one (children, theirs, …), depth first, in
    the order they were asked for; those never started (a call cut short) are left out."""
    out = []
    for child in delegations(store, conversation_id):
        try:
            store.conversation(child.child_id)
        except UnknownConversation:
            continue
        out.append(child.child_id)
        out.extend(descendants(store, child.child_id))
    return out


def delete_with_children(store: Store, conversation_id: str) -> list[str]:
    """Delete a conversation and every conversation below it (what its sub-agents read and
    wrote came from its tasks); the ids deleted, descendants first, the conversation last."""
    store.conversation(conversation_id)  # unknown: refused before anything is deleted
    gone = [*reversed(descendants(store, conversation_id)), conversation_id]
    for cid in gone:
        store.delete_conversation(cid)
    return gone
