"""The audit reads (``stores/audit_sql.py``) on SQLite and PostgreSQL: a batch of conversations
read in a few statements is what the Store reads one conversation at a time, and each call's
exact request in the window is the one ``Store.call`` rebuilds."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from threadline.cache.prefix import Cause, Divergence, PrefixReport
from threadline.cache.pricing import reported_split
from threadline.calls import CallStatus, ModelCall, Rendering, SentRequest, Timings, Usage
from threadline.items import NewItem, canonical_json, new_id
from threadline.stores.audit import CANONICAL_JSON, RENDERED_PROMPT
from threadline.stores.base import MAIN, Commit, NewBranch, NewConversation, Store

T0 = datetime(2026, 3, 1, 22, 0, tzinfo=UTC)
TRICKY = 'say ","tokens":[1,2] and ,"prompt":{"keep":0} \\ "quoted"\n'


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        from threadline.stores.sqlite import SQLiteStore
        opened: Store = SQLiteStore(tmp_path / "threadline.db")
    else:
        from threadline.stores.postgres import PostgresStore
        opened = PostgresStore(request.getfixturevalue("postgres_url"))
    yield opened
    opened.close()


def _turn(store: Store, cid: str, n: int, at: datetime, request: SentRequest,
          branch: str = MAIN, fork: NewBranch | None = None) -> None:
    head = None if fork is not None else store.head(cid, branch)
    call = ModelCall(id=new_id("call_"), conversation_id=cid, branch=branch, turn=n,
                     head_seq=0, reply_seq=None, status=CallStatus.OK, model=request.model,
                     request=request, response={"text": f"reply {n}", "z": [1, 2.5]} | (
                         {"usage": {"input_tokens": 3, "cache_read_input_tokens": 20 * n,
                                    "cache_creation_input_tokens": 7}} if n == 2 else {}),
                     usage=Usage(10 * n, 4, 2), timings=Timings(1.5, 3.25), started_at=at,
                     prefix=_prefix(n) if n > 1 else None)
    store.commit(Commit(conversation_id=cid, created_at=at, branch=branch, fork=fork,
                        expected_head=None if head is None else head.seq,
                        check_head=fork is None, items=[NewItem.user(f"question {n}"),
                                                        NewItem.assistant(f"reply {n}")],
                        call=call, call_reply_index=1))


def _prefix(n: int) -> dict[str, Any]:
    """A prefix report as a call records it; every other one without token counts."""
    tokens = n % 2 == 0
    return PrefixReport(
        "call_before", 100 * n, 60 * n, 90 * n, 10 * n if tokens else None,
        7 * n if tokens else None, 9 * n if tokens else None, None, None,
        Cause.APPEND_ONLY if n < 4 else Cause.SYSTEM_CHANGED, "detail",
        Divergence(1, 40, None, "history", 3, "content") if n == 4 else None,
        (("system", "stable", 0, 1), ("history", "append", 1, n))).to_json()


def _log(store: Store) -> tuple[str, str]:
    """A conversation of canonical-JSON requests, each the last grown by a message, then a
    fork; and one of rendered prompts that quote the delta's own key names, then a request
    without a prompt, then one with a prompt again."""
    payloads = store_conversation(store)
    messages: list[dict[str, Any]] = []
    for n in range(1, 5):
        messages = [*messages, {"role": "user", "content": f"question {n} {TRICKY}"}]
        _turn(store, payloads, n, T0 + timedelta(minutes=n * 40),
              SentRequest(model="m", messages=tuple(messages), params={"temperature": 0.5}))
    _turn(store, payloads, 2, T0 + timedelta(hours=4), SentRequest(model="m", messages=(
        *messages[:1], {"role": "user", "content": "forked"})), branch="b2",
        fork=NewBranch("b2", 2))
    rendered = store_conversation(store)
    prompt = ""
    for n in range(1, 5):
        prompt += f"<user>{TRICKY}{n}</user>"
        rendering = None if n == 3 else Rendering.of(prompt, range(len(prompt)))
        _turn(store, rendered, n, T0 + timedelta(minutes=n * 40), SentRequest(
            model="m", messages=({"role": "user", "content": prompt},), rendering=rendering))
    return payloads, rendered


def store_conversation(store: Store) -> str:
    cid = new_id("c_")
    store.commit(Commit(conversation_id=cid, created_at=T0, create=NewConversation(cid)))
    return cid


def test_a_batch_reads_as_the_store_reads_each_conversation(store: Store) -> None:
    payloads, rendered = _log(store)
    audit = store.audit
    assert audit is not None
    start, end = T0.replace(hour=0), T0.replace(hour=0) + timedelta(days=1)
    gone = store_conversation(store)
    store.delete_conversation(gone)
    read = audit.conversations([rendered, gone, payloads])
    assert [c.id for c in read] == [rendered, payloads]  # as asked, the deleted one left out
    calls_of = audit.calls([rendered, gone, payloads], start, end)
    assert list(calls_of) == [rendered, payloads]
    encodings = set()
    for conversation in read:
        cid = conversation.id
        assert [(i.conversation_id, i.seq, i.branch, i.turn, i.kind, i.content, i.hash,
                 i.created_at, i.text) for i in conversation.items] == [
            (i.conversation_id, i.seq, i.branch, i.turn, i.kind, i.content, i.hash,
             i.created_at, i.text) for i in audit.items(cid)]
        assert conversation.branches == store.branches(cid)
        listed = store.calls(cid)
        assert [logged.id for logged in calls_of[cid]] == [c.id for c in listed]
        for logged, call in zip(calls_of[cid], listed, strict=True):
            assert (logged.conversation_id, logged.branch, logged.turn, logged.head_seq,
                    logged.reply_seq, logged.status, logged.model, logged.prompt_tokens,
                    logged.cached_tokens, logged.completion_tokens, logged.ttft_ms,
                    logged.total_ms, logged.started_at, logged.error, logged.purpose) == (
                call.conversation_id, call.branch, call.turn, call.head_seq, call.reply_seq,
                str(call.status), call.model, call.usage.prompt_tokens,
                call.usage.cached_tokens, call.usage.completion_tokens, call.timings.ttft_ms,
                call.timings.total_ms, call.started_at, call.error, call.purpose)
            assert logged.usage == call.response.get("usage")
            report = None if call.prefix is None else PrefixReport.from_json(call.prefix)
            assert (None if logged.prefix is None else (
                logged.prefix.cause, logged.prefix.prompt_tokens, logged.prefix.reused_tokens,
                logged.prefix.reused_bytes, logged.prefix.prompt_bytes)) == (
                None if report is None else (
                    report.cause, report.prompt_tokens, report.reused_tokens,
                    report.reused_bytes, report.prompt_bytes))
            call = store.call(logged.id)
            assert logged.response_json == canonical_json(dict(call.response))
            assert logged.prefix_json == (None if call.prefix is None
                                          else canonical_json(dict(call.prefix)))
            if not start <= call.started_at < end:
                assert logged.request is None
                continue
            assert call.request is not None and logged.request is not None
            assert logged.request.data == call.request.exact_bytes()
            assert logged.request.encoding == (CANONICAL_JSON if call.request.rendering is None
                                               else RENDERED_PROMPT)
            encodings.add(logged.request.encoding)
    assert encodings == {CANONICAL_JSON, RENDERED_PROMPT}
    calls = [logged for c in calls_of.values() for logged in c]
    assert {reported_split({"usage": logged.usage}) for logged in calls} == {None, (3, 40, 7)}
    assert {logged.prefix.cause for logged in calls if logged.prefix} == \
        {"append_only", "system_changed"}
    assert {logged.prefix.reused_tokens is None for logged in calls if logged.prefix} == \
        {True, False}
    assert sum(logged.request is None for logged in calls) >= 2  # next day
    assert audit.conversations([]) == [] and audit.calls([], start, end) == {}


def test_activity_lists_each_utc_day_with_the_conversations_active_on_it(store: Store) -> None:
    payloads, rendered = _log(store)  # from 22:40 on one day to 02:00 on the next
    audit = store.audit
    assert audit is not None
    idle = store_conversation(store)  # a conversation with no item and no call
    expected: dict[date, set[str]] = {}
    for cid in (payloads, rendered, idle):
        moments = [i.created_at for i in audit.items(cid)] + \
            [c.started_at for c in store.calls(cid)]
        for moment in moments:
            expected.setdefault(moment.date(), set()).add(cid)
    everything = audit.activity(T0 - timedelta(days=30), T0 + timedelta(days=30))
    assert list(everything) == sorted(expected) and len(everything) == 2
    assert everything == {day: sorted(ids) for day, ids in expected.items()}
    # the window's ends: from 23:00 (the first turn left out) to the next day's 00:30
    window = audit.activity(T0 + timedelta(hours=1), T0 + timedelta(hours=2, minutes=30))
    assert window == {T0.date(): sorted([payloads, rendered]),
                      (T0 + timedelta(days=1)).date(): sorted([payloads, rendered])}
    assert audit.activity(T0 + timedelta(hours=5), T0 + timedelta(days=30)) == {}
