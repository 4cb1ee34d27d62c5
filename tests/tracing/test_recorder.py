"""The recording tracer (``threadline/tracing/recorder.py``): the same spans as the live
tracer, whole turns sampled or left out, nothing it meets failing a turn, and a queue that
drops and counts turns rather than growing without bound."""

from __future__ import annotations

import gc
import logging
import re
import time
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import (
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from tests.tracing.conftest import Traced, tools
from threadline.errors import ModelCallFailed
from threadline.models.scripted import ScriptedModel, ToolCalls
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.tracing.batch import Batches
from threadline.tracing.setup import SCOPE, Tracing
from threadline.tracing.sink import RecordedTurn, ToExporters
from threadline.version import __version__

# what differs from one run to the next: ids, and a time
VARY = ("gen_ai.conversation.id", "threadline.call.id", "gen_ai.tool.call.id",
        "gen_ai.response.time_to_first_chunk")
IDS = re.compile(r"\b(call|c|conv)_[0-9a-z]{20,}\b")


def _same(value: object) -> str:
    return IDS.sub("ID", str(value))


def _shape(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """What a span says, without its ids and times: name, kind, its parent's name, attributes,
    status and event names (ids and times differ from run to run)."""
    names = {s.context.span_id: s.name for s in spans if s.context is not None}
    return sorted((s.name, s.kind, names.get(s.parent.span_id) if s.parent else None,
                   sorted((k, _same(v)) for k, v in (s.attributes or {}).items()
                          if k not in VARY),
                   s.status.status_code, _same(s.status.description),
                   [e.name for e in s.events])
                  for s in spans)


def _conversation(store: SQLiteStore, traced: Traced) -> None:
    model = ScriptedModel([ToolCalls.of(("weather", {"city": "Oslo"})), "It is sunny.",
                           "Bye.", ConnectionError("backend down")])
    engine = standard_engine(store, model, tools=tools(), tracer=traced.tracing)
    cid = engine.run_turn("Weather in Oslo?").conversation_id
    engine.run_turn("Thanks!", conversation_id=cid)
    with pytest.raises(ModelCallFailed):
        engine.run_turn("One more?", conversation_id=cid)


@pytest.mark.parametrize("capture_content", [False, True])
def test_recorded_spans_say_what_live_spans_say(tmp_path: Any, capture_content: bool) -> None:
    shapes = []
    for recorded in (False, True):
        store = SQLiteStore(tmp_path / f"{recorded}.db")
        traced = Traced(recorded=recorded, capture_content=capture_content)
        _conversation(store, traced)
        shapes.append(_shape(traced.spans))
        traced.tracing.shutdown()
        store.close()
    live, recorded_ = shapes
    assert len(live) == 21  # three turns: 9 spans, then 6, then 6 (the call failed)
    assert recorded_ == live


@pytest.mark.parametrize("ratio", [0.0, 0.5])
def test_the_sampler_keeps_or_leaves_out_whole_recorded_turns(store: SQLiteStore,
                                                              ratio: float) -> None:
    kept = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    tracing = Tracing.recorded(ToExporters([kept], provider.resource,
                                           InstrumentationScope(SCOPE, __version__)),
                               provider=provider)
    engine = standard_engine(store, ScriptedModel(), tracer=tracing)
    cid = None
    for n in range(20):
        cid = engine.run_turn(f"turn {n}", conversation_id=cid).conversation_id
    assert tracing.flush()
    spans = kept.get_finished_spans()
    turns = [s for s in spans if s.name == "threadline.turn"]
    assert len(spans) == 6 * len(turns)  # every step of a kept turn, none of the others
    assert (turns == []) if ratio == 0.0 else (0 < len(turns) < 20)
    assert len(store.calls(cid)) == 20
    tracing.shutdown()


class RaisingSampler(Sampler):
    def should_sample(self, parent_context: Context | None, trace_id: int, name: str,
                      *args: Any, **kwargs: Any) -> SamplingResult:
        raise RuntimeError("sampler broken")

    def get_description(self) -> str:
        return "raising"


class RaisingIds(RandomIdGenerator):
    def generate_span_id(self) -> int:
        raise RuntimeError("id generator broken")


class RaisingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise RuntimeError("exporter broken")


@pytest.mark.parametrize("broken", ["sampler", "ids", "exporter"])
def test_nothing_the_recorder_meets_fails_a_turn(store: SQLiteStore, broken: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    provider = TracerProvider(sampler=RaisingSampler() if broken == "sampler" else None,
                              id_generator=RaisingIds() if broken == "ids" else None)
    exporter = RaisingExporter() if broken == "exporter" else InMemorySpanExporter()
    tracing = Tracing.recorded(ToExporters([exporter], provider.resource,
                                           InstrumentationScope(SCOPE, __version__)),
                               provider=provider)
    engine = standard_engine(store, ScriptedModel([ToolCalls.of(("weather", {"city": "X"})),
                                                   "done"]), tools=tools(), tracer=tracing)
    with caplog.at_level(logging.ERROR):
        result = engine.run_turn("hello")
        tracing.flush()
    assert result.reply.text == "done"
    assert f"{broken if broken != 'ids' else 'id generator'} broken" in caplog.text
    tracing.shutdown()


def test_the_engine_calls_a_recorder_unguarded_and_a_live_tracer_guarded() -> None:
    from threadline.turn.trace import Guarded, guarded

    recorded = Traced(recorded=True).tracing
    assert guarded(recorded) is recorded
    assert isinstance(guarded(Traced().tracing), Guarded)
    recorded.shutdown()


class Kept:
    """A sink that keeps what it is given."""

    def __init__(self) -> None:
        self.turns: list[RecordedTurn] = []
        self.calls = 0

    def export(self, turns: Sequence[RecordedTurn]) -> None:
        self.calls += 1
        self.turns += turns

    def flush(self, timeout_ms: int) -> bool:
        return True

    def shutdown(self) -> None:
        pass


def test_turns_past_the_queues_bound_are_dropped_and_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    sink = Kept()
    batches: Batches[int] = Batches(lambda n: (n, 1, (), []), sink, interval_s=60,
                                    max_waiting=3)
    with caplog.at_level(logging.WARNING):
        for n in range(5):
            batches.add(n)
    assert batches.dropped == 2 and "dropping turns" in caplog.text
    assert batches.flush(1000)
    assert [turn[0] for turn in sink.turns] == [0, 1, 2]
    batches.shutdown()
    batches.add(9)  # after shutdown: dropped, never exported
    assert batches.dropped == 3 and len(sink.turns) == 3


def test_a_full_batch_wakes_the_exporting_thread_before_its_interval() -> None:
    sink = Kept()
    batches: Batches[int] = Batches(lambda n: (n, 1, (), []), sink, interval_s=60,
                                    max_turns=4)
    for n in range(4):
        batches.add(n)
    for _ in range(200):
        if len(sink.turns) == 4:
            break
        time.sleep(0.01)
    assert len(sink.turns) == 4
    batches.shutdown()


def test_an_ended_turn_is_freed_without_the_cycle_collector(store: SQLiteStore) -> None:
    """Nothing a recorded turn leaves waits for the collector's full pass, which walks every
    object of the process (a turn with a tool call, then one without)."""
    sink = Kept()
    tracing = Tracing.recorded(sink, provider=TracerProvider())
    model = ScriptedModel([ToolCalls.of(("weather", {"city": "Oslo"})), "It is sunny.",
                           "Bye."])
    engine = standard_engine(store, model, tools=tools(), tracer=tracing)
    gc.collect()
    gc.disable()
    try:
        cid = engine.run_turn("Weather in Oslo?").conversation_id
        engine.run_turn("Thanks!", conversation_id=cid)
        assert tracing.flush()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector would free is kept, to be read
        gc.collect()
        left = [o for o in gc.garbage if type(o).__module__ == "threadline.tracing.recorder"]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert len(sink.turns) == 2 and sum(len(turn[3]) for turn in sink.turns) == 15
    assert left == []
    tracing.shutdown()


class Traces(ScriptedModel):
    """A model whose call is traced by the application's own tracer (an HTTP client's
    instrumentation would be)."""

    def __init__(self, tracer: Any, replies: Sequence[Any]) -> None:
        super().__init__(replies)
        self.tracer = tracer

    def complete(self, request: Any, *, on_text: Any = None) -> Any:
        with self.tracer.start_as_current_span("http POST"):
            return super().complete(request, on_text=on_text)


def test_code_a_step_runs_traces_its_own_spans_under_that_step(store: SQLiteStore,
                                                               how: str) -> None:
    from threadline.turn.tools import Tool

    theirs = InMemorySpanExporter()  # the application's own provider and exporter
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(theirs))
    tracer = provider.get_tracer("app")

    def weather(arguments: Any, context: Any) -> str:
        with tracer.start_as_current_span("weather service"):
            return "sunny"

    traced = Traced(recorded=how == "recorded")  # as live spans nest
    model = Traces(tracer, [ToolCalls.of(("weather", {"city": "Oslo"})), "It is sunny."])
    tool = Tool("weather", "Weather for a city.", tools()[0].parameters, weather)
    standard_engine(store, model, tools=[tool], tracer=traced.tracing).run_turn("Weather?")
    ours = {s.name: s for s in traced.spans}
    [service] = [s for s in theirs.get_finished_spans() if s.name == "weather service"]
    calls = [s for s in theirs.get_finished_spans() if s.name == "http POST"]
    assert service.parent is not None and ours["execute_tool weather"].context is not None
    assert service.parent.span_id == ours["execute_tool weather"].context.span_id
    turn = ours["threadline.turn"].context
    assert turn is not None and len(calls) == 2  # a model call is no parent: the turn is
    assert all(c.parent is not None and c.parent.span_id == turn.span_id for c in calls)
    assert {s.context.trace_id for s in theirs.get_finished_spans() if s.context} == {
        turn.trace_id}
    traced.tracing.shutdown()
