"""Prefix reports: how much each request reuses, and the cause when it does not."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.cache.attribution import Previous, report
from threadline.cache.prefix import Cause, PrefixReport, block_hashes, layout_of
from threadline.calls import Rendering, SentRequest
from threadline.engine import Engine
from threadline.errors import ModelCallFailed
from threadline.items import Item, ItemKind, NewItem, chain_items
from threadline.models.base import Completion, OnText
from threadline.models.scripted import ScriptedModel, render_chatml
from threadline.request import Message, Request, Segment, SegmentKind, Stability, TailBlock
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.assemble import assemble

_T = datetime(2026, 5, 3, tzinfo=UTC)


def _items(*specs: tuple[ItemKind, dict]) -> list[Item]:
    return chain_items("c_t", [NewItem(kind, content) for kind, content in specs],
                       created_at=_T)


def user(text: str) -> tuple[ItemKind, dict]:
    return ItemKind.USER, {"text": text}


def bot(text: str) -> tuple[ItemKind, dict]:
    return ItemKind.ASSISTANT, {"text": text}


def _sent(request: Request, **params: object) -> SentRequest:
    return SentRequest(model="m", messages=tuple(request.openai_messages()), params=params,
                       rendering=Rendering.of(render_chatml(request)))


def _pair(before: Request, after: Request, *, same_branch: bool = True,
          before_params: dict | None = None, after_params: dict | None = None) -> PrefixReport:
    first = _sent(before, **(before_params or {}))
    previous = Previous("call_prev", first, layout_of(before), same_branch)
    return report(_sent(after, **(after_params or {})), after, previous)


HISTORY = _items(user("Book Lisbon on 3 May."), bot("Done: TP123."), user("And a hotel?"))


def test_an_appended_turn_reuses_all_of_the_previous_request() -> None:
    result = _pair(assemble(HISTORY[:1], system="s"), assemble(HISTORY, system="s"))
    assert result.cause is Cause.APPEND_ONLY and result.expected
    assert result.reused_bytes == result.previous_bytes
    assert result.ratio == result.best_ratio < 1.0
    assert result.divergence is None


def test_a_timestamp_in_the_system_prompt_is_named() -> None:
    result = _pair(assemble(HISTORY[:1], system="You are helpful. Now: 2026-05-03 12:01"),
                   assemble(HISTORY, system="You are helpful. Now: 2026-05-03 12:02"))
    assert result.cause is Cause.VOLATILE_VALUE and not result.expected
    assert "timestamp" in result.detail
    assert result.divergence is not None and result.divergence.segment == "system"
    assert result.ratio < result.best_ratio / 2  # everything after the clock is re-sent


def test_a_changed_system_prompt_without_a_volatile_value() -> None:
    result = _pair(assemble(HISTORY[:1], system="You are helpful."),
                   assemble(HISTORY, system="You are terse."))
    assert result.cause is Cause.SYSTEM_CHANGED


def test_reordered_and_changed_tools() -> None:
    a, b = {"name": "a"}, {"name": "b"}
    request = assemble(HISTORY)
    reordered = _pair(request, request, before_params={"tools": [a, b]},
                      after_params={"tools": [b, a]})
    assert reordered.cause is Cause.TOOLS_REORDERED
    changed = _pair(request, request, before_params={"tools": [a]},
                    after_params={"tools": [a, b]})
    assert changed.cause is Cause.TOOLS_CHANGED


def test_a_rewritten_item_is_located() -> None:
    edited = [HISTORY[0], replace(HISTORY[1], content={"text": "Done: TP124."}), HISTORY[2]]
    result = _pair(assemble(HISTORY[:2]), assemble(edited))
    assert result.cause is Cause.HISTORY_REWRITTEN
    assert result.divergence is not None and result.divergence.seq == 2
    assert result.divergence.field == "content" and "item #2" in result.detail


def test_a_compaction_is_an_expected_reset() -> None:
    marker = Item("c_t", 4, "main", 3, 2, ItemKind.COMPACTION,
                  {"strategy": "summary", "summary": "Flight TP123 booked.",
                   "through_seq": 2}, "b2:x", _T)
    result = _pair(assemble(HISTORY), assemble([*HISTORY, marker]))
    assert result.cause is Cause.COMPACTION_RESET and result.expected
    assert result.divergence is not None and result.divergence.seq == 4


def test_content_spliced_above_the_history_is_volatile() -> None:
    before = assemble(HISTORY)
    spliced = Request(tools=(), segments=(
        Segment(SegmentKind.SYSTEM, Stability.CONVERSATION, ()),
        Segment(SegmentKind.HISTORY, Stability.CONVERSATION,
                (Message("user", "Retrieved: hotel list v2"), *before.messages))))
    result = _pair(before, spliced)
    assert result.cause is Cause.VOLATILE_VALUE and "without a log item" in result.detail


def test_a_changed_model_is_named_first() -> None:
    request = assemble(HISTORY)
    previous = Previous("p", replace(_sent(request), model="other"), layout_of(request))
    assert report(_sent(request), request, previous).cause is Cause.MODEL_CHANGED


def test_tokens_and_full_blocks_are_counted() -> None:
    request = assemble(HISTORY)
    prompt = render_chatml(request)
    before = replace(_sent(request), rendering=Rendering.of(prompt, range(100)))
    after = replace(_sent(request), rendering=Rendering.of(
        prompt, tuple(range(70)) + (999,) + tuple(range(40))))
    result = report(after, request, Previous("p", before, layout_of(request)))
    assert (result.reused_tokens, result.previous_tokens, result.prompt_tokens) == (70, 100, 111)
    assert result.reused_blocks == 70 // 16 == 4
    # what vLLM would find: the leading block hashes the two requests share
    shared = sum(1 for a, b in zip(block_hashes(list(before.tokens or ())),
                                   block_hashes(list(after.tokens or ())), strict=False)
                 if a == b)
    assert shared == result.reused_blocks
    assert block_hashes(list(range(40)))[:2] == block_hashes(list(range(33)))[:2]
    assert len(block_hashes(list(range(40)))) == 2  # the partial third block has no hash


def test_reports_survive_a_json_round_trip() -> None:
    result = _pair(assemble(HISTORY[:2]), assemble(
        [HISTORY[0], replace(HISTORY[1], content={"text": "x"})]))
    assert PrefixReport.from_json(result.to_json()) == result


def test_every_engine_call_carries_a_report(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = SQLiteStore(tmp_path / "t.db")
    engine = Engine(store, ScriptedModel())
    first = engine.run_turn("one")
    second = engine.run_turn("two", conversation_id=first.conversation_id)
    fork = engine.regenerate(first.conversation_id, second.reply.seq)
    causes = [c.prefix["cause"] for c in store.calls(first.conversation_id)
              if c.prefix is not None]
    assert causes == ["first_call", "append_only", "fork"]
    assert store.call(fork.call.id).prefix["previous_call_id"] == second.call.id  # type: ignore[index]
    store.close()


class PayloadModel(ScriptedModel):
    """The scripted model recording a provider payload (messages and params, no rendering),
    as the HTTP backends do."""

    def complete(self, request: Request, *, on_text: OnText | None = None) -> Completion:
        done = super().complete(request, on_text=on_text)
        return replace(done, sent=replace(done.sent, rendering=None, params={"stream": True}))


def _stored(path: Path, call_id: str) -> tuple[str | None, dict]:
    """A call's delta base and its delta, as the store wrote them."""
    with sqlite3.connect(path) as db:
        base, encoded = db.execute("SELECT base_call_id, request_delta FROM model_calls "
                                   "WHERE id = ?", (call_id,)).fetchone()
    return base, json.loads(encoded)


def _turns(path: Path, model: ScriptedModel, *, fail: bool) -> tuple[SQLiteStore, list[str]]:
    """Two turns; with ``fail``, the second's first call fails before any payload is recorded
    and the turn is answered again. The turn calls' ids."""
    store = SQLiteStore(path)
    engine = Engine(store, model)
    cid = engine.run_turn("one").conversation_id
    if fail:
        model.enqueue(RuntimeError("the server went away"))
        with pytest.raises(ModelCallFailed):
            engine.run_turn("two", conversation_id=cid)
        engine.answer(cid)
    else:
        engine.run_turn("two", conversation_id=cid)
    return store, [c.id for c in store.calls(cid)]


@pytest.mark.parametrize("shape", ["rendered", "messages"])
def test_a_retry_is_measured_against_the_call_before_the_failure(tmp_path: Path,
                                                                shape: str) -> None:
    def model() -> ScriptedModel:
        return ScriptedModel() if shape == "rendered" else PayloadModel()

    retrying = model()
    clean, (_, second) = _turns(tmp_path / "clean.db", model(), fail=False)
    store, (first, failed, retry) = _turns(tmp_path / "t.db", retrying, fail=True)
    assert store.call(failed).messages_only
    reports = {call_id: PrefixReport.from_json(store.call(call_id).prefix or {})
               for call_id in (failed, retry)}
    # the retry is measured against the call before the failure, not the failed call's bare
    # messages (which no backend sent): exactly as the same turn without the failure is
    expected = PrefixReport.from_json(clean.call(second).prefix or {})
    assert reports[retry].previous_call_id == first
    assert replace(reports[retry], previous_call_id=None) == \
        replace(expected, previous_call_id=None)
    assert reports[retry].cause is Cause.APPEND_ONLY and reports[retry].reused_bytes > 0
    # the failed call itself: its messages against the previous request's messages
    assert reports[failed].previous_call_id == first
    assert reports[failed].cause is Cause.APPEND_ONLY and reports[failed].reused_bytes > 0
    # the store encodes the retry against that call too: it adds only its new bytes
    base, delta = _stored(tmp_path / "t.db", retry)
    assert base == first and delta["messages"]["keep"] == 1
    if shape == "rendered":
        assert delta["prompt"]["keep"] == reports[retry].reused_bytes
    fresh = SQLiteStore(tmp_path / "t.db")  # and it reads back as the model was given it
    read = fresh.call(retry).request
    assert read is not None and list(read.messages) == retrying.requests[-1].openai_messages()
    assert read.prompt == (render_chatml(retrying.requests[-1]) if shape == "rendered"
                           else None)
    for handle in (fresh, store, clean):
        handle.close()


def test_a_payload_that_keeps_every_message_and_param_is_append_only() -> None:
    before, after = assemble(HISTORY[:1], system="s"), assemble(HISTORY, system="s")

    def payload(request: Request, **params: object) -> SentRequest:
        return SentRequest(model="m", messages=tuple(request.openai_messages()), params=params)

    appended = report(payload(after, stream=True), after,
                      Previous("p", payload(before, stream=True), layout_of(before)))
    assert appended.cause is Cause.APPEND_ONLY and appended.reused_bytes > 0
    changed = report(payload(after, stream=False), after,
                     Previous("p", payload(before, stream=True), layout_of(before)))
    assert changed.cause is Cause.TEMPLATE_CHANGED and not changed.expected


def test_a_fork_whose_first_call_failed_is_measured_against_the_other_branch(
        tmp_path: Path) -> None:
    model = ScriptedModel()
    store = SQLiteStore(tmp_path / "t.db")
    engine = Engine(store, model)
    first = engine.run_turn("one")
    cid = first.conversation_id
    second = engine.run_turn("two", conversation_id=cid)
    model.enqueue(RuntimeError("the server went away"))
    with pytest.raises(ModelCallFailed):
        engine.regenerate(cid, second.reply.seq)
    branch = store.calls(cid)[-1].branch
    retry = engine.answer(cid, branch)
    assert retry.call is not None and retry.call.prefix is not None
    measured = PrefixReport.from_json(retry.call.prefix)
    assert (measured.previous_call_id, measured.cause) == (second.call.id, Cause.FORK)
    store.close()


_turn = st.tuples(st.text(min_size=1, max_size=30).filter(str.strip),
                  st.text(max_size=30),
                  st.booleans(),
                  st.none() | st.text(min_size=1, max_size=20))


@settings(max_examples=60, deadline=None)
@given(st.lists(_turn, min_size=2, max_size=8), st.text(max_size=20))
def test_each_request_extends_the_previous_one_up_to_its_last_breakpoint(
        turns: list[tuple[str, str, bool, str | None]], system: str) -> None:
    specs: list[tuple[ItemKind, dict]] = []
    previous: Previous | None = None
    previous_request: Request | None = None
    for n, (question, answer, with_tool, volatile) in enumerate(turns):
        specs.append(user(question))
        tail = [TailBlock("time", volatile)] if volatile else []
        request = assemble(_items(*specs), system=system or None, tail=tail)
        sent = _sent(request)
        result = report(sent, request, previous)
        if previous is not None and previous_request is not None:
            stable = Request(previous_request.tools, (Segment(
                SegmentKind.HISTORY, Stability.CONVERSATION,
                tuple(previous_request.messages[: previous_request.cache_points()[-1]])),))
            stable_bytes = render_chatml(stable).removesuffix("<|im_start|>assistant\n")
            assert sent.exact_bytes().startswith(stable_bytes.encode("utf-8"))
            assert result.expected, result.detail
            assert result.cause in (Cause.APPEND_ONLY, Cause.TAIL_REPLACED)
        previous = Previous(f"call_{n}", sent, layout_of(request))
        previous_request = request
        if with_tool:
            specs += [(ItemKind.TOOL_CALL, {"call_id": f"t{n}", "name": "f", "arguments": {}}),
                      (ItemKind.TOOL_RESULT, {"call_id": f"t{n}", "output": answer})]
        specs.append(bot(answer))
