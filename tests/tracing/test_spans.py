"""Spans of turns, checked with the SDK's in-memory exporter: the tree, the names, the GenAI
attributes against the call records, threadline's own, content only when opted in, and
exporters or processors that fail never failing a turn."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanKind, StatusCode

from tests.tracing.conftest import Traced, tools, tree
from threadline.compaction.plan import Policy
from threadline.errors import InputError, ModelCallFailed
from threadline.items import ItemKind
from threadline.models.base import Completion, OnText
from threadline.models.scripted import ScriptedModel, ToolCalls
from threadline.request import Request
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.tracing.setup import Tracing

SECRET = "my account number is 12345"


def _turn_with_a_tool(store: SQLiteStore, traced: Traced) -> Any:
    model = ScriptedModel([ToolCalls.of(("weather", {"city": "Oslo"})), "It is sunny."])
    return standard_engine(store, model, tools=tools(), tracer=traced.tracing).run_turn(
        f"{SECRET}. Weather in Oslo?")


def test_one_span_per_turn_with_a_child_per_step(store: SQLiteStore, traced: Traced) -> None:
    _turn_with_a_tool(store, traced)
    assert tree(traced.spans) == [["threadline.turn", [
        ["threadline.provider working state"], ["threadline.provider memory"],
        ["threadline.ingest"], ["chat scripted"], ["threadline.commit tool_calls"],
        ["execute_tool weather"], ["chat scripted"], ["threadline.commit reply"]]]]
    assert len({s.context.trace_id for s in traced.spans if s.context}) == 1
    kinds = {s.name: s.kind for s in traced.spans}
    assert kinds["chat scripted"] is SpanKind.INTERNAL  # the scripted model runs in-process
    assert kinds["execute_tool weather"] is SpanKind.INTERNAL
    assert all(s.status.status_code is StatusCode.UNSET for s in traced.spans)


def test_model_call_spans_carry_the_genai_attributes_of_each_call_record(
        store: SQLiteStore, traced: Traced) -> None:
    result = _turn_with_a_tool(store, traced)
    calls = store.calls(result.conversation_id)
    spans = traced.named("chat ")
    assert len(spans) == len(calls) == 2
    for span, call in zip(spans, calls, strict=True):
        prefix = call.prefix or {}
        assert dict(span.attributes or {}) == {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "threadline.scripted",
            "gen_ai.request.model": "scripted",
            "gen_ai.conversation.id": result.conversation_id,
            "gen_ai.usage.input_tokens": call.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": call.usage.completion_tokens,
            "gen_ai.usage.cache_read.input_tokens": call.usage.cached_tokens,
            "gen_ai.response.finish_reasons": (call.response["finish_reason"],),
            **({} if call.timings.ttft_ms is None else
               {"gen_ai.response.time_to_first_chunk": pytest.approx(
                   call.timings.ttft_ms / 1000)}),
            "threadline.turn.index": 1, "threadline.branch": "main",
            "threadline.prefix.reuse_ratio": prefix["ratio"],
            "threadline.prefix.cause": prefix["cause"],
            "threadline.prefix.expected": prefix["expected"],
            "threadline.prefix.reused_tokens": prefix["reused_tokens"]}
    assert [s.attributes["gen_ai.response.finish_reasons"] for s in spans if s.attributes] == \
        [("tool_calls",), ("stop",)]
    # the span is the call's own time: within the turn, no longer than the recorded call
    turn = traced.one("threadline.turn")
    for span, call in zip(spans, calls, strict=True):
        assert span.start_time and span.end_time and turn.start_time and turn.end_time
        assert turn.start_time <= span.start_time <= span.end_time <= turn.end_time
        assert (span.end_time - span.start_time) / 1e6 <= call.timings.total_ms + 1


def test_the_turn_and_its_tool_spans_say_where_the_turn_is(store: SQLiteStore,
                                                           traced: Traced) -> None:
    result = _turn_with_a_tool(store, traced)
    where = {"gen_ai.conversation.id": result.conversation_id, "threadline.branch": "main",
             "threadline.turn.index": 1}
    turn = dict(traced.one("threadline.turn").attributes or {})
    assert turn == {**where, "threadline.call.id": result.call.id,
                    "threadline.turn.deduplicated": False}
    tool = dict(traced.one("execute_tool weather").attributes or {})
    assert tool == {**where, "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "weather", "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.id": result.tool_results[0].content["call_id"]}
    commit = dict(traced.one("threadline.commit reply").attributes or {})
    assert commit == {"threadline.commit.kind": "reply", "threadline.call.id": result.call.id,
                      "threadline.call.status": "ok"}
    ingest = dict(traced.one("threadline.ingest").attributes or {})
    assert ingest == {"threadline.message.seq": result.message.seq}


def _all_values(spans: Sequence[ReadableSpan]) -> str:
    return json.dumps([dict(s.attributes or {}) for s in spans], default=str) + json.dumps(
        [[e.name, dict(e.attributes or {})] for s in spans for e in s.events], default=str)


def test_message_content_stays_off_the_spans_by_default(store: SQLiteStore,
                                                        traced: Traced) -> None:
    _turn_with_a_tool(store, traced)
    found = _all_values(traced.spans)
    assert SECRET not in found and "Oslo" not in found and "sunny" not in found
    assert not any(key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg",
                                   "gen_ai.tool.call.result"))
                   for s in traced.spans for key in (s.attributes or {}))


def test_message_content_goes_on_the_spans_when_opted_in(store: SQLiteStore,
                                                        how: str) -> None:
    traced = Traced(capture_content=True, recorded=how == "recorded")
    _turn_with_a_tool(store, traced)
    first, second = traced.named("chat ")
    assert first.attributes and second.attributes
    assert json.loads(str(first.attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": f"{SECRET}. Weather in Oslo?"}]}]
    [asked] = json.loads(str(first.attributes["gen_ai.output.messages"]))
    assert asked["finish_reason"] == "tool_calls"
    assert [(p["type"], p["name"], p["arguments"]) for p in asked["parts"]] == [
        ("tool_call", "weather", {"city": "Oslo"})]
    shown = json.loads(str(second.attributes["gen_ai.input.messages"]))
    assert [m["role"] for m in shown] == ["user", "assistant", "tool"]
    assert shown[2]["parts"][0]["type"] == "tool_call_response"
    assert "sunny in Oslo" in shown[2]["parts"][0]["result"]
    assert json.loads(str(second.attributes["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "It is sunny."}],
         "finish_reason": "stop"}]
    tool = traced.one("execute_tool weather").attributes or {}
    assert json.loads(str(tool["gen_ai.tool.call.arguments"])) == {"city": "Oslo"}
    assert tool["gen_ai.tool.call.result"] == "sunny in Oslo"


def test_content_capture_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from threadline.tracing import from_environment

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    for value, on in (("true", True), ("SPAN_ONLY", True), ("false", False), ("", False)):
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
        tracing = from_environment()
        assert tracing is not None and tracing.capture_content is on
        tracing.shutdown()


class Caching(ScriptedModel):
    """A scripted model that reports cache writes as Anthropic's API does."""

    model_id = "anthropic:claude-test"

    def complete(self, request: Request, *, on_text: OnText | None = None) -> Completion:
        done = super().complete(request, on_text=on_text)
        usage = done.usage
        reported = {"input_tokens": usage.prompt_tokens - usage.cached_tokens - 7,
                    "cache_read_input_tokens": usage.cached_tokens,
                    "cache_creation_input_tokens": 7, "output_tokens": usage.completion_tokens}
        return replace(done, extra={"usage": reported})


def test_cache_writes_are_there_where_the_provider_reports_them(store: SQLiteStore,
                                                                traced: Traced) -> None:
    engine = standard_engine(store, Caching(), tracer=traced.tracing)
    engine.run_turn("hello")
    span = traced.one("chat claude-test")
    assert span.kind is SpanKind.CLIENT
    assert span.attributes is not None
    assert span.attributes["gen_ai.provider.name"] == "anthropic"
    assert span.attributes["gen_ai.request.model"] == "claude-test"
    assert span.attributes["gen_ai.usage.cache_creation.input_tokens"] == 7


def test_a_compaction_shows_as_the_cause_segment_and_id_of_the_next_miss(
        store: SQLiteStore, traced: Traced) -> None:
    engine = standard_engine(store, ScriptedModel(), tracer=traced.tracing,
                             policy=Policy(low_water=60, high_water=120, context_window=400,
                                           reserve=10))
    cid = engine.run_turn("hello " * 30).conversation_id
    for n in range(4):
        engine.run_turn(f"more words {n} " * 10, conversation_id=cid)
    compactions = [i.seq for i in store.history(cid) if i.kind is ItemKind.COMPACTION]
    assert compactions
    reset = [s.attributes for s in traced.named("chat ") if s.attributes
             and s.attributes["threadline.prefix.cause"] == "compaction_reset"]
    assert reset
    assert {a["threadline.compaction.seq"] for a in reset} <= set(compactions)
    assert all(a["threadline.prefix.expected"] is True and "threadline.prefix.segment" in a
               and float(str(a["threadline.prefix.reuse_ratio"])) < 1 for a in reset)
    indexes = [s.attributes["threadline.turn.index"] for s in traced.named("chat ")
               if s.attributes]
    assert indexes == sorted(indexes) and indexes[-1] == 5


def test_a_failed_call_and_its_turn_end_in_error(store: SQLiteStore, traced: Traced) -> None:
    engine = standard_engine(store, ScriptedModel([ConnectionError("backend down")]),
                             tracer=traced.tracing)
    with pytest.raises(ModelCallFailed):
        engine.run_turn("hello")
    call = traced.one("chat scripted")
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes and call.attributes["error.type"] == "ConnectionError"
    assert "gen_ai.usage.input_tokens" not in call.attributes
    turn = traced.one("threadline.turn")
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.attributes and turn.attributes["error.type"] == "ModelCallFailed"
    assert [e.name for e in turn.events] == ["exception"]
    assert traced.one("threadline.commit failed_call").attributes == {
        "threadline.commit.kind": "failed_call",
        "threadline.call.id": store.calls(str(turn.attributes["gen_ai.conversation.id"]))[0].id,
        "threadline.call.status": "failed"}


def test_a_refused_turn_is_one_span_in_error(store: SQLiteStore, traced: Traced) -> None:
    with pytest.raises(InputError):
        standard_engine(store, ScriptedModel(), tracer=traced.tracing).run_turn("   ")
    [turn] = traced.spans
    assert turn.name == "threadline.turn" and turn.status.status_code is StatusCode.ERROR
    assert turn.attributes and turn.attributes["error.type"] in ("InputError", "EmptyMessage")


def test_a_retried_send_is_a_deduplicated_turn(store: SQLiteStore, traced: Traced) -> None:
    engine = standard_engine(store, ScriptedModel(), tracer=traced.tracing)
    first = engine.run_turn("hello", client_msg_id="m-1")
    engine.run_turn("hello", conversation_id=first.conversation_id, client_msg_id="m-1")
    turns = traced.named("threadline.turn")
    assert [t.attributes["threadline.turn.deduplicated"] for t in turns if t.attributes] == \
        [False, True]
    assert len(traced.named("chat ")) == 1


class Raising(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise RuntimeError("exporter broken")

    def shutdown(self) -> None:
        pass


class RaisingProcessor(SimpleSpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("processor broken")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("processor broken")


@pytest.mark.parametrize("processor", [
    lambda: SimpleSpanProcessor(Raising()),
    lambda: BatchSpanProcessor(Raising(), schedule_delay_millis=1),
    lambda: RaisingProcessor(Raising())])
def test_an_exporter_that_raises_never_fails_a_turn(store: SQLiteStore, processor: Any,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor())
    engine = standard_engine(store, ScriptedModel([ToolCalls.of(("weather", {"city": "X"})),
                                                   "done"]),
                             tools=tools(), tracer=Tracing(provider))
    with caplog.at_level(logging.ERROR):
        result = engine.run_turn("hello")
        provider.force_flush()
    assert result.reply.text == "done"
    assert "broken" in caplog.text
    assert not [i for i in store.history(result.conversation_id) if i.kind is ItemKind.NOTE]
    provider.shutdown()


@pytest.mark.parametrize("ratio", [0.0, 0.5])
def test_the_sampler_keeps_or_leaves_out_whole_turns(store: SQLiteStore, ratio: float) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    kept = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    model = ScriptedModel([reply for _ in range(20)
                           for reply in (ToolCalls.of(("weather", {"city": "X"})), "done")])
    engine = standard_engine(store, model, tools=tools(), tracer=Tracing(provider))
    cid = None
    for n in range(20):
        cid = engine.run_turn(f"turn {n}", conversation_id=cid).conversation_id
    spans = kept.get_finished_spans()
    turns = [s for s in spans if s.name == "threadline.turn"]
    assert len(spans) == 9 * len(turns)  # every step of a kept turn, none of the others
    if ratio == 0.0:
        assert turns == []
    else:
        assert 0 < len(turns) < 20
        kept_traces = {s.context.trace_id for s in turns if s.context}
        assert {s.context.trace_id for s in spans if s.context} == kept_traces
    assert len(store.calls(cid)) == 40  # every turn ran, traced or not


def test_a_served_reply_is_committed_under_the_turn_with_its_item(store: SQLiteStore,
                                                                  traced: Traced) -> None:
    from tests.turn.test_trace import Answering
    from threadline.engine import Engine

    first = Engine(store, ScriptedModel()).run_turn("hello")
    engine = Engine(store, ScriptedModel(), providers=[Answering(first.call.id)],
                    tracer=traced.tracing)
    result = engine.run_turn("hello again", conversation_id=first.conversation_id)
    assert tree(traced.spans) == [["threadline.turn", [
        ["threadline.provider answers"], ["threadline.ingest"], ["threadline.commit served"]]]]
    assert traced.one("threadline.commit served").attributes == {
        "threadline.commit.kind": "served", "threadline.reply.seq": result.reply.seq}
    assert traced.one("threadline.provider answers").attributes == {
        "threadline.provider.name": "answers", "threadline.provider.found": True,
        "threadline.provider.kind": "context"}
    assert traced.one("threadline.turn").attributes == {
        "gen_ai.conversation.id": result.conversation_id, "threadline.branch": "main",
        "threadline.turn.index": 2, "threadline.call.id": first.call.id,
        "threadline.turn.deduplicated": False}


def test_a_childs_turn_is_traced_under_its_parents_delegate_call(traced: Traced,
                                                                  store: SQLiteStore) -> None:
    from tests.turn.test_delegate import Searches, delegating, explorer, researcher, routed
    from threadline.engine import Engine
    from threadline.turn.delegate import Delegation, parent_of

    model = routed(delegating("find it"), explorer(1))
    engine = Engine(store, model, agents=[researcher(Searches())], delegation=Delegation(),
                    tracer=traced.tracing)
    cid = engine.run_turn("go").conversation_id
    [parent_turn, child_turn] = sorted(traced.named("threadline.turn"),
                                       key=lambda s: s.start_time or 0)
    [delegate] = traced.named("execute_tool delegate")
    assert child_turn.parent is not None and delegate.context is not None
    assert child_turn.parent.span_id == delegate.context.span_id
    assert parent_turn.context is not None and child_turn.context is not None
    assert child_turn.context.trace_id == parent_turn.context.trace_id  # one trace
    assert child_turn.attributes is not None and parent_turn.attributes is not None
    child = str(child_turn.attributes["gen_ai.conversation.id"])
    assert parent_turn.attributes["gen_ai.conversation.id"] == cid
    link = parent_of(store.conversation(child))
    assert link is not None and link.conversation_id == cid
