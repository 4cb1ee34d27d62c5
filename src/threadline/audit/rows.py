"""The audit rows of one conversation for one UTC day, read from the log.

A turn is a (branch, turn number) that the branch answered itself: its user message, what the
context providers found for it (the rewritten query, the passages retrieved, the memories
recalled), the reply, and every call it made, summed, priced under a cache profile
(``cache/report.py``), with the prefix report of its first call. A regenerate's turn is on its
fork, with the user message the fork grew from. A turn belongs to the day it started; a call
to the day it started; a compaction and a memory write to the day of their item.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from threadline.cache.prefix import EXPECTED, Cause, reuse_ratio
from threadline.cache.pricing import CacheProfile, usage_split
from threadline.cache.report import price
from threadline.items import Branch, ItemKind
from threadline.stores.audit import AuditBackend, LoggedCall, LoggedConversation, LoggedItem
from threadline.stores.base import Store
from threadline.stores.memory import MemoryEntry, MemoryJob

Row = dict[str, Any]
CONVERSATIONS_PER_READ = 256  # a few statements a batch; its calls' deltas held meanwhile


@dataclass(frozen=True)
class Pricing:
    profile: CacheProfile
    input_price: float  # USD per million input tokens


@dataclass
class DayRows:
    """One day's rows, each table in its final order once ``sort`` has run."""

    turns: list[Row] = field(default_factory=list)
    calls: list[Row] = field(default_factory=list)
    requests: dict[str, Row] = field(default_factory=dict)  # by sha256, first use first
    compactions: list[Row] = field(default_factory=list)
    memory_writes: list[Row] = field(default_factory=list)

    def tables(self) -> dict[str, list[Row]]:
        return {"turns": self.turns, "calls": self.calls,
                "requests": list(self.requests.values()), "compactions": self.compactions,
                "memory_writes": self.memory_writes}


class Entries:
    """Memory entries by user, read once per user, for a write's provenance."""

    def __init__(self, store: Store) -> None:
        self._store, self._by_user = store, dict[str, dict[str, MemoryEntry]]()

    def get(self, user_id: str, entry_id: str) -> MemoryEntry | None:
        found = self._by_user.get(user_id)
        if found is None:
            memory = self._store.memory
            entries = [] if memory is None else memory.entries(user_id)
            found = self._by_user[user_id] = {e.id: e for e in entries}
        return found.get(entry_id)


def day_rows(audit: AuditBackend, start: datetime, end: datetime, pricing: Pricing,
             jobs: Mapping[str, Sequence[MemoryJob]], entries: Entries,
             active: Sequence[str] | None = None) -> DayRows:
    """The rows of [start, end), sorted, read a batch of conversations at a time; ``active``:
    the conversations active then, sorted, where the caller has read them already."""
    rows = DayRows()
    if active is None:
        active = sorted({cid for ids in audit.activity(start, end).values() for cid in ids})
    for first in range(0, len(active), CONVERSATIONS_PER_READ):
        for conversation in audit.conversations(
                active[first:first + CONVERSATIONS_PER_READ], start, end):
            conversation_rows(conversation, start, end, pricing,
                              jobs.get(conversation.id, ()), entries, rows)
    sort(rows)
    return rows


def conversation_rows(conversation: LoggedConversation, start: datetime, end: datetime,
                      pricing: Pricing, jobs: Sequence[MemoryJob], entries: Entries,
                      into: DayRows) -> None:
    """Add the conversation's rows for [start, end) to ``into``."""
    def within(moment: datetime) -> bool:
        return start <= moment < end

    cid, items, branches = conversation.id, conversation.items, conversation.branches
    by_seq = {item.seq: item for item in items}
    calls = conversation.calls
    costs = {call.id: price(call.prompt_tokens, call.prefix, usage_split(call.usage),
                            pricing.profile, pricing.input_price)[2:] for call in calls}
    by_turn: dict[tuple[str, int], list[LoggedCall]] = defaultdict(list)
    for call in calls:
        by_turn[(call.branch, call.turn)].append(call)
    for branch in branches:
        groups: dict[int, list[LoggedItem]] = defaultdict(list)
        for item in _history(items, branches, branch.name):
            groups[item.turn].append(item)
        for turn in sorted(set(groups) | {t for b, t in by_turn if b == branch.name}):
            row = _turn_row(cid, branch.name, turn, groups.get(turn, []),
                            by_turn.get((branch.name, turn), []), costs, by_seq)
            if row is not None and within(row["started_at"]):
                into.turns.append(row)
    for order, call in enumerate(calls):
        if call.request is not None:  # started in the window read
            into.calls.append(_call_row(call, costs[call.id][0], order, into.requests))
    for item in items:
        if item.kind is ItemKind.COMPACTION and within(item.created_at):
            into.compactions.append(_compaction_row(item, by_seq))
    for job in jobs:
        source = by_seq.get(job.seq)
        if source is not None and within(source.created_at):
            into.memory_writes.extend(_memory_rows(job, source, entries))


def _history(items: Sequence[LoggedItem], branches: Sequence[Branch], name: str
             ) -> list[LoggedItem]:
    """``Store.history`` of the branch, from the conversation's items already read: the
    branch's own, then each ancestor's up to where its child forked."""
    spec = {b.name: b for b in branches}
    limits: dict[str, float] = {}
    current: str | None = name
    limit = float("inf")
    while current is not None:
        limits[current] = limit
        branch = spec[current]
        current, limit = branch.parent, float(branch.fork_seq or 0)
    return [i for i in items if i.seq <= limits.get(i.branch, -1)]


def sort(rows: DayRows) -> None:
    """Each table in time order, ties broken by where the row is in the log."""
    rows.turns.sort(key=lambda r: (r["started_at"], r["conversation_id"], r["branch"],
                                   r["turn"]))
    rows.calls.sort(key=lambda r: (r["started_at"], r["conversation_id"], r.pop("_order")))
    requests, rows.requests = rows.requests, {}
    for call in rows.calls:  # a request's row goes where the first call that sent it is
        sha = call["request_sha256"]
        if sha not in rows.requests:
            rows.requests[sha] = requests[sha]
    rows.compactions.sort(key=lambda r: (r["created_at"], r["conversation_id"], r["seq"]))
    rows.memory_writes.sort(key=lambda r: (r["message_at"], r["conversation_id"], r["seq"],
                                           r["position"]))


def _turn_row(conversation_id: str, branch: str, turn: int, group: Sequence[LoggedItem],
              calls: Sequence[LoggedCall], costs: Mapping[str, tuple[float, float]],
              by_seq: Mapping[int, LoggedItem]) -> Row | None:
    """``costs``: each call's cost under the profile and with no cache at all."""
    user = retrieval = recall = None  # the first user message, the last retrieval and recall
    own_reply = None                  # the branch's own last assistant message
    own_started: datetime | None = None
    for item in group:  # one pass: a day has thousands of turns
        kind = item.kind
        if item.branch == branch:
            if own_started is None or item.created_at < own_started:
                own_started = item.created_at
            if kind is ItemKind.ASSISTANT:
                own_reply = item
        if kind is ItemKind.USER:
            user = item if user is None else user
        elif kind is ItemKind.RETRIEVAL:
            retrieval = item
        elif kind is ItemKind.RECALL:
            recall = item
    if turn == 0 or user is None or (own_started is None and not calls):
        return None  # before the first message, or a turn the branch inherited
    turn_calls = [call for call in calls if call.purpose == "turn"]
    last_call = turn_calls[-1] if turn_calls else None
    reply: LoggedItem | None = None
    if last_call is not None and last_call.reply_seq is not None:
        reply = by_seq.get(last_call.reply_seq)
    if reply is None:
        reply = own_reply
    status = ("unanswered" if reply is None else "no_call") if last_call is None \
        else last_call.status
    first = turn_calls[0] if turn_calls else None
    prefix = None if first is None else first.prefix
    cause = None if prefix is None else _CAUSES.get(prefix.cause) or _cause(prefix.cause)
    started = own_started
    prompt = cached = completion = 0
    for call in calls:
        if started is None or call.started_at < started:
            started = call.started_at
        prompt += call.prompt_tokens
        cached += call.cached_tokens
        completion += call.completion_tokens
    user_text = user.text
    return {
        "conversation_id": conversation_id, "branch": branch, "turn": turn,
        "started_at": started, "user_seq": user.seq, "user_hash": user.hash,
        "reply_seq": None if reply is None else reply.seq,
        "reply_hash": None if reply is None else reply.hash, "status": status,
        "query": user_text if retrieval is None else retrieval.content.get("raw", user_text),
        "rewritten_query": retrieval.content["query"] if retrieval is not None else
        recall.content["query"] if recall is not None else None,
        "rewrite_winner": None if retrieval is None else retrieval.content.get("winner"),
        "retrieved_ids": None if retrieval is None else
        [str(p.get("id")) for p in retrieval.content["passages"]],
        "recalled_ids": None if recall is None else
        [str(m.get("id")) for m in recall.content["memories"]],
        "reply": None if reply is None else reply.text,
        "calls": len(calls), "call_ids": [call.id for call in calls],
        "model": None if last_call is None else last_call.model,
        "prompt_tokens": prompt, "cached_tokens": cached, "completion_tokens": completion,
        # floats summed by sum(), as before, so every cost is the same to the last bit
        "cost_usd": sum([costs[c.id][0] for c in calls]) if calls else None,
        "uncached_cost_usd": sum([costs[c.id][1] for c in calls]) if calls else None,
        "prefix_ratio": None if prefix is None else round(reuse_ratio(prefix), 6),
        "prefix_cause": None if cause is None else cause[0],
        "prefix_expected": None if cause is None else cause[1],
        "prefix_report": None if first is None else first.prefix_json,
        "ttft_ms": None if first is None else first.ttft_ms,
        "total_ms": sum([c.total_ms for c in calls]) if calls else None,
    }


# each cause's name and whether it is expected, looked up rather than built per turn
_CAUSES = {cause.value: (str(cause), cause in EXPECTED) for cause in Cause}


def _cause(value: str) -> tuple[str, bool]:
    cause = Cause(value)  # ValueError for a cause this threadline does not know
    return str(cause), cause in EXPECTED


def _call_row(call: LoggedCall, cost_usd: float, order: int, requests: dict[str, Row]) -> Row:
    """The call's row, its request's row added to ``requests`` the first time it is sent;
    the response and prefix report as the log stores them (canonical JSON)."""
    exact = call.request
    assert exact is not None
    sha = hashlib.sha256(exact.data).hexdigest()
    if sha not in requests:
        requests[sha] = {"request_sha256": sha, "request_bytes": len(exact.data),
                         "encoding": exact.encoding, "request": exact.data}
    return {"call_id": call.id, "conversation_id": call.conversation_id, "branch": call.branch,
            "turn": call.turn, "purpose": call.purpose, "status": call.status,
            "model": call.model, "started_at": call.started_at, "head_seq": call.head_seq,
            "reply_seq": call.reply_seq, "request_sha256": sha,
            "request_bytes": len(exact.data), "prompt_tokens": call.prompt_tokens,
            "cached_tokens": call.cached_tokens, "completion_tokens": call.completion_tokens,
            "ttft_ms": call.ttft_ms, "total_ms": call.total_ms, "cost_usd": cost_usd,
            "prefix_report": call.prefix_json, "error": call.error,
            "response": call.response_json, "_order": order}


def _compaction_row(item: LoggedItem, by_seq: Mapping[int, LoggedItem]) -> Row:
    content = item.content
    estimate = content.get("estimate") or {}
    price = estimate.get("price") or {}
    through = content.get("through_seq")
    pinned = [int(s) for s in content.get("pinned", ())]
    return {"conversation_id": item.conversation_id, "branch": item.branch, "seq": item.seq,
            "turn": item.turn, "hash": item.hash, "created_at": item.created_at,
            "strategy": content["strategy"], "reason": content.get("reason"),
            "through_seq": through, "kept_from_seq": None if through is None else through + 1,
            "cleared_seqs": [int(s) for s in content.get("cleared", ())],
            "pinned_seqs": pinned,
            "pinned_constraints": [by_seq[s].text if s in by_seq else None for s in pinned],
            "summary": content.get("summary"),
            "tokens_before": estimate.get("tokens_before"),
            "tokens_after": estimate.get("tokens_after"),
            "kept_prefix_tokens": estimate.get("kept_prefix_tokens"),
            "append_usd": price.get("append_usd"), "compact_usd": price.get("compact_usd")}


def _memory_rows(job: MemoryJob, item: LoggedItem, entries: Entries) -> list[Row]:
    out = []
    for position, decision in enumerate(job.decisions or ()):
        entry_id = decision.get("entry")
        entry = None if entry_id is None else entries.get(job.user_id, str(entry_id))
        out.append({"conversation_id": job.conversation_id, "seq": job.seq,
                    "item_hash": item.hash, "position": position, "user_id": job.user_id,
                    "message_at": item.created_at, "decision": decision.get("decision"),
                    "entry_id": entry_id, "replaces": decision.get("replaces"),
                    "reason": decision.get("reason"), "extractor": decision.get("extractor"),
                    "valid": decision.get("valid"),
                    "entry_source": None if entry is None else str(entry.source),
                    "entry_trusted": None if entry is None else entry.trusted,
                    "attempts": job.attempts, "text": decision.get("text")})
    return out
