"""Replay: every recorded request of the fixture log is re-assembled byte for byte, and a
change to the assembly is named by the first segment it moves."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

import threadline.engine
from tests.replay.log import answers, engine_for
from threadline.calls import CallStatus
from threadline.errors import NotFound
from threadline.items import Item, ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.providers import ReminderProvider
from threadline.replay import CallReplay, calls_to_replay, replay
from threadline.request import Request, TailBlock
from threadline.stores.base import Store
from threadline.turn import assemble as assembly


def _replayed(store: Store, cid: str, model: ScriptedModel | None = None) -> list[CallReplay]:
    engine = engine_for(store, ScriptedModel(default=answers))
    return list(replay(engine, calls_to_replay(store, cid), model=model))


def test_every_call_of_the_log_replays_to_the_same_bytes(
        recorded: tuple[Store, str]) -> None:
    store, cid = recorded
    results = _replayed(store, cid)
    calls = [r.call for r in results]
    # the log has what it promises: each kind of call, a failure, forks, a compaction
    assert Counter(c.purpose for c in calls).keys() == {"turn", "compaction", "memory"}
    assert CallStatus.FAILED in {c.status for c in calls}
    assert len({c.branch for c in calls}) == 3
    assert any(c.prefix and c.prefix["cause"] == "compaction_reset" for c in calls)
    assert any(m.get("role") == "tool" for c in calls if c.request
               for m in c.request.messages)
    tails = [m["content"] for c in calls if c.request for m in c.request.messages
             if str(m.get("content", "")).startswith("[current time]")]
    assert any("[retrieved passages" in t and "[remembered from earlier" in t for t in tails)
    summaries = [c for c in calls if c.request and any(
        str(m.get("content", "")).startswith("Summary of the conversation so far")
        for m in c.request.messages)]
    assert summaries
    assert [(r.outcome, r.difference, r.reason) for r in results] == \
        [("same", None, None)] * len(results)
    assert {r.compared for r in results} == {"bytes", "messages"}  # "messages": the failure
    assert [r.call.status for r in results if r.compared == "messages"] == [CallStatus.FAILED]


def test_the_log_s_failed_call_and_its_retry_are_no_unexpected_miss(
        recorded_sqlite: tuple[Store, str]) -> None:
    store, cid = recorded_sqlite
    calls = [c for c in store.calls(cid) if c.purpose == "turn"]
    assert [(c.id, c.prefix and c.prefix["cause"]) for c in calls
            if not (c.prefix and c.prefix["expected"])] == []
    n = next(n for n, c in enumerate(calls) if c.status is CallStatus.FAILED)
    # both are measured against the call before the failure, not its bare messages
    assert calls[n].prefix and calls[n + 1].prefix
    assert calls[n].prefix["previous_call_id"] == calls[n - 1].id
    assert calls[n + 1].prefix["previous_call_id"] == calls[n - 1].id


def test_one_call_replays_by_its_id(recorded_sqlite: tuple[Store, str]) -> None:
    store, cid = recorded_sqlite
    last = store.calls(cid)[-1]
    [result] = list(replay(engine_for(store, ScriptedModel()), calls_to_replay(store, last.id)))
    assert (result.call.id, result.outcome) == (last.id, "same")


def test_an_unknown_id_is_neither_a_call_nor_a_conversation(
        recorded_sqlite: tuple[Store, str]) -> None:
    store, _ = recorded_sqlite
    with pytest.raises(NotFound, match="no model call or conversation has the id 'call_nope'"):
        calls_to_replay(store, "call_nope")


def _first_change(results: Sequence[CallReplay]) -> CallReplay:
    return next(r for r in results if r.outcome == "differs")


def test_a_changed_system_prompt_is_named_as_the_system_segment(
        recorded_sqlite: tuple[Store, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store, cid = recorded_sqlite
    original = threadline.engine.assemble

    def assemble(history: Sequence[Item], **kw: object) -> Request:
        kw["system"] = f"{kw['system']} Be kind."
        return original(history, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(threadline.engine, "assemble", assemble)
    results = _replayed(store, cid)
    changed = _first_change(results)
    assert changed.call.id == results[0].call.id  # the very first call already differs
    d = changed.difference
    assert d is not None
    assert (d.segment, d.message, d.seq, d.field) == ("system", 0, None, "content")
    prompt = changed.call.request.prompt  # type: ignore[union-attr]
    assert prompt is not None and d.byte == prompt.encode().index(b"You are terse.") + 14
    assert "You are terse.<|im_end|>\n<|im_start|>user\n[current" in d.recorded
    assert "You are terse. Be kind.<|im_end|>" in d.replayed
    # side calls are assembled by compaction and the memory writer, not by the engine
    assert {r.outcome for r in results if r.call.purpose != "turn"} == {"same"}
    assert all(r.outcome == "differs" for r in results if r.call.purpose == "turn")


def test_a_changed_tail_renderer_is_named_as_the_tail(
        recorded_sqlite: tuple[Store, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store, cid = recorded_sqlite

    def render(self: ReminderProvider, history: Sequence[Item]) -> list[TailBlock]:
        return [TailBlock(self.name.upper(), b.text) for b in original(self, history)]

    original = ReminderProvider.render
    monkeypatch.setattr(ReminderProvider, "render", render)
    d = _first_change(_replayed(store, cid)).difference
    assert d is not None and (d.segment, d.message, d.seq, d.field) == ("tail", 1, None,
                                                                        "content")
    assert "[REMINDER]" in d.replayed and "[reminder]" in d.recorded


def test_a_changed_history_message_is_named_with_its_item(
        recorded_sqlite: tuple[Store, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store, cid = recorded_sqlite
    original = assembly._message

    def message(item: Item) -> object:
        built = original(item)
        return built if built.role != "assistant" else type(built)(
            built.role, built.content + " ", built.seq, built.tool_calls, built.tool_call_id,
            built.item_kind, built.item_hash)

    monkeypatch.setattr(assembly, "_message", message)
    results = _replayed(store, cid)
    changed = _first_change(results)
    d = changed.difference
    assert d is not None and (d.segment, d.field) == ("history", "content")
    first_reply = next(i for i in store.history(cid) if i.kind is ItemKind.ASSISTANT)
    assert d.seq == first_reply.seq and changed.call.turn == 2
    assert all(r.outcome == "same" for r in results[:results.index(changed)])


def test_a_changed_chat_template_is_named_as_a_rendering_difference(
        recorded_sqlite: tuple[Store, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import threadline.models.scripted as scripted

    store, cid = recorded_sqlite
    monkeypatch.setattr(scripted, "_render", lambda m: f"<|im_start|>{m.role}\n{m.content}"
                                                        "<|im_end|>\n\n")
    d = _first_change(_replayed(store, cid)).difference
    assert d is not None and (d.segment, d.message, d.field) == ("system", 0, "rendering")


def test_a_model_rerun_compares_the_answers(recorded_sqlite: tuple[Store, str]) -> None:
    store, cid = recorded_sqlite
    results = _replayed(store, cid, model=ScriptedModel(default=answers))
    assert {r.outcome for r in results} == {"same"}
    answers_ = {r.call.id: r.answer for r in results}
    assert all(a is not None for a in answers_.values())
    # the echo and the extractions answer again as recorded; the scripted tool call, the
    # failure and its retry were queued replies, which a fresh model does not have
    differing = [r for r in results if r.answer is not None and not r.answer.same]
    assert differing and len(differing) < len(results) // 2
    tool = next(r for r in results if r.call.response.get("tool_calls"))
    assert tool in differing and "→ weather({'city': 'Lisbon'})" in tool.answer.recorded  # type: ignore[union-attr]
    failed = next(r for r in results if r.call.status is CallStatus.FAILED)
    assert failed.answer is not None and failed.answer.recorded == ""
