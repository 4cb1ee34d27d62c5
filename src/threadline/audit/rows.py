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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from typing import Any

from threadline.audit.tables import CALLS, COMPACTIONS, MEMORY_WRITES, TURNS
from threadline.cache.prefix import EXPECTED, Cause, reuse_ratio
from threadline.cache.pricing import CacheProfile, usage_split
from threadline.cache.report import price
from threadline.items import Branch, ItemKind
from threadline.stores.audit import AuditBackend, LoggedCall, LoggedConversation, LoggedItem
from threadline.stores.base import Store
from threadline.stores.memory import MemoryEntry, MemoryJob

# a row is a tuple of its table's columns in order (``tables.py``): an export builds tens of
# thousands a day, and a tuple is built, sorted and transposed faster than a dict
Row = tuple[Any, ...]
CONVERSATIONS_PER_READ = 256  # a few statements a batch; its calls' deltas held meanwhile


@dataclass(frozen=True)
class Pricing:
    profile: CacheProfile
    input_price: float  # USD per million input tokens


@dataclass
class DayRows:
    """One day's rows, each table in its final order once ``sort_calls`` and ``sort_later``
    have run (a call's row carries its place among its conversation's calls after its columns
    until then)."""

    turns: list[Row] = field(default_factory=list)
    calls: list[Row] = field(default_factory=list)
    requests: dict[str, Row] = field(default_factory=dict)  # by sha256, first use first
    compactions: list[Row] = field(default_factory=list)
    memory_writes: list[Row] = field(default_factory=list)


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
             active: Sequence[str] | None = None) -> dict[str, list[Row]]:
    """The rows of [start, end) by table, each in its final order (``day_tables``, gathered)."""
    return dict(day_tables(audit, start, end, pricing, jobs, entries, active))


def day_tables(audit: AuditBackend, start: datetime, end: datetime, pricing: Pricing,
               jobs: Mapping[str, Sequence[MemoryJob]], entries: Entries,
               active: Sequence[str] | None = None) -> Iterator[tuple[str, list[Row]]]:
    """Each table of [start, end) by name, whole and in its final order, a batch of
    conversations read at a time: ``calls`` and ``requests`` first, from the calls alone, then
    the rest, from the items and branches read after; so an export encodes the first two
    while it reads and builds the rest. ``active``: the conversations active then, sorted,
    where the caller has read them already."""
    rows = DayRows()
    if active is None:
        active = sorted({cid for ids in audit.activity(start, end).values() for cid in ids})
    batches = [active[first:first + CONVERSATIONS_PER_READ]
               for first in range(0, len(active), CONVERSATIONS_PER_READ)]
    priced: dict[str, tuple[list[LoggedCall], dict[str, tuple[float, float]]]] = {}
    for batch in batches:
        for cid, calls in audit.calls(batch, start, end).items():
            priced[cid] = calls, call_rows(calls, pricing, rows)
    sort_calls(rows)
    yield "calls", rows.calls
    yield "requests", list(rows.requests.values())
    for batch in batches:
        for conversation in audit.conversations(batch):
            calls, costs = priced.get(conversation.id, ([], {}))
            later_rows(conversation, calls, costs, start, end,
                       jobs.get(conversation.id, ()), entries, rows)
    sort_later(rows)
    yield "turns", rows.turns
    yield "compactions", rows.compactions
    yield "memory_writes", rows.memory_writes


def call_rows(calls: Sequence[LoggedCall], pricing: Pricing, into: DayRows
              ) -> dict[str, tuple[float, float]]:
    """Add a conversation's calls started in the window read (and their requests) to
    ``into``; return every call's cost under the profile and with no cache at all."""
    costs = {call.id: price(call.prompt_tokens, call.prefix, usage_split(call.usage),
                            pricing.profile, pricing.input_price)[2:] for call in calls}
    for order, call in enumerate(calls):
        if call.request is not None:  # started in the window read
            into.calls.append(_call_row(call, costs[call.id][0], order, into.requests))
    return costs


def later_rows(conversation: LoggedConversation, calls: Sequence[LoggedCall],
               costs: Mapping[str, tuple[float, float]], start: datetime, end: datetime,
               jobs: Sequence[MemoryJob], entries: Entries, into: DayRows) -> None:
    """Add the conversation's turns, compactions and memory writes of [start, end) to
    ``into``; ``calls`` and ``costs``: its calls, and what ``call_rows`` returned for them."""
    def within(moment: datetime) -> bool:
        return start <= moment < end

    cid, items, branches = conversation.id, conversation.items, conversation.branches
    by_seq = {item.seq: item for item in items}
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
            if row is not None and within(row[_TURN_STARTED]):
                into.turns.append(row)
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


_TURN_STARTED = TURNS.names.index("started_at")
_CALL_SHA = CALLS.names.index("request_sha256")
_TURN_ORDER = TURNS.at("started_at", "conversation_id", "branch", "turn")
_CALL_ORDER = itemgetter(CALLS.names.index("started_at"), CALLS.names.index("conversation_id"),
                         len(CALLS.columns))  # the place among its conversation's calls
_COMPACTION_ORDER = COMPACTIONS.at("created_at", "conversation_id", "seq")
_MEMORY_ORDER = MEMORY_WRITES.at("message_at", "conversation_id", "seq", "position")


def sort_calls(rows: DayRows) -> None:
    """Calls in time order, ties broken by where the call is in the log; each request where
    the first call that sent it is."""
    rows.calls.sort(key=_CALL_ORDER)
    width = len(CALLS.columns)
    rows.calls = [call[:width] for call in rows.calls]
    requests, rows.requests = rows.requests, {}
    for call in rows.calls:
        sha = call[_CALL_SHA]
        if sha not in rows.requests:
            rows.requests[sha] = requests[sha]


def sort_later(rows: DayRows) -> None:
    """The other tables in time order, ties broken by where the row is in the log."""
    rows.turns.sort(key=_TURN_ORDER)
    rows.compactions.sort(key=_COMPACTION_ORDER)
    rows.memory_writes.sort(key=_MEMORY_ORDER)


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
    cost: list[float] = []
    uncached: list[float] = []
    total: list[float] = []
    for call in calls:  # one pass: the sums below take the same floats in the same order
        if started is None or call.started_at < started:
            started = call.started_at
        prompt += call.prompt_tokens
        cached += call.cached_tokens
        completion += call.completion_tokens
        priced = costs[call.id]
        cost.append(priced[0])
        uncached.append(priced[1])
        total.append(call.total_ms)
    user_text = _text(user)
    return (  # TURNS' columns, in order
        conversation_id, branch, turn, started, user.seq, user.hash,
        None if reply is None else reply.seq, None if reply is None else reply.hash, status,
        user_text if retrieval is None else retrieval.content.get("raw", user_text),
        retrieval.content["query"] if retrieval is not None else
        recall.content["query"] if recall is not None else None,
        None if retrieval is None else retrieval.content.get("winner"),
        None if retrieval is None else [str(p.get("id")) for p in retrieval.content["passages"]],
        None if recall is None else [str(m.get("id")) for m in recall.content["memories"]],
        None if reply is None else _text(reply),
        len(calls), [call.id for call in calls], None if last_call is None else last_call.model,
        prompt, cached, completion,
        # floats summed by sum(), as before, so every cost is the same to the last bit
        sum(cost) if calls else None, sum(uncached) if calls else None,
        None if prefix is None else round(reuse_ratio(prefix), 6),
        None if cause is None else cause[0], None if cause is None else cause[1],
        None if first is None else first.prefix_json, None if first is None else first.ttft_ms,
        sum(total) if calls else None,
    )


def _text(item: LoggedItem) -> str:
    """``item.text``, a message's text taken straight from its content (two a turn)."""
    text = item.content.get("text")
    return text if isinstance(text, str) else item.text


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
    if sha not in requests:  # REQUESTS' columns
        requests[sha] = (sha, len(exact.data), exact.encoding, exact.data)
    return (  # CALLS' columns, in order, then the call's place, which ``sort_calls`` drops
        call.id, call.conversation_id, call.branch, call.turn, call.purpose, call.status,
        call.model, call.started_at, call.head_seq, call.reply_seq, sha, len(exact.data),
        call.prompt_tokens, call.cached_tokens, call.completion_tokens, call.ttft_ms,
        call.total_ms, cost_usd, call.prefix_json, call.error, call.response_json, order)


def _compaction_row(item: LoggedItem, by_seq: Mapping[int, LoggedItem]) -> Row:
    content = item.content
    estimate = content.get("estimate") or {}
    price = estimate.get("price") or {}
    through = content.get("through_seq")
    pinned = [int(s) for s in content.get("pinned", ())]
    return (  # COMPACTIONS' columns, in order
        item.conversation_id, item.branch, item.seq, item.turn, item.hash, item.created_at,
        content["strategy"], content.get("reason"), through,
        None if through is None else through + 1,
        [int(s) for s in content.get("cleared", ())], pinned,
        [by_seq[s].text if s in by_seq else None for s in pinned], content.get("summary"),
        estimate.get("tokens_before"), estimate.get("tokens_after"),
        estimate.get("kept_prefix_tokens"), price.get("append_usd"), price.get("compact_usd"))


def _memory_rows(job: MemoryJob, item: LoggedItem, entries: Entries) -> list[Row]:
    out = []
    for position, decision in enumerate(job.decisions or ()):
        entry_id = decision.get("entry")
        entry = None if entry_id is None else entries.get(job.user_id, str(entry_id))
        out.append((  # MEMORY_WRITES' columns, in order
            job.conversation_id, job.seq, item.hash, position, job.user_id, item.created_at,
            decision.get("decision"), entry_id, decision.get("replaces"),
            decision.get("reason"), decision.get("extractor"), decision.get("valid"),
            None if entry is None else str(entry.source),
            None if entry is None else entry.trusted, job.attempts, decision.get("text")))
    return out
