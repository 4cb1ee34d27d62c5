"""The tracer seam: the engine opens a span around each step of a turn, nested as the steps
are (tool calls in their own threads included), hands each what it already holds, and a
tracer that fails never fails a turn."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import pytest

from threadline.calls import ModelCall
from threadline.engine import Engine
from threadline.errors import InputError, ModelCallFailed
from threadline.items import Item, NewItem
from threadline.models.calling import CallOutcome
from threadline.models.scripted import ScriptedModel, ToolCalls
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.providers import Gathering, Provider, Served
from threadline.turn.result import TurnResult
from threadline.turn.tools import Tool, ToolContext
from threadline.turn.trace import QUIET, Fact, Span, Step, guarded

CITY = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}


@dataclass
class Recorded:
    step: Step
    name: str
    parent: Recorded | None
    facts: list[Fact] = field(default_factory=list)
    error: BaseException | None = None
    thread: str = ""
    children: list[Recorded] = field(default_factory=list)

    def tree(self) -> list[Any]:
        label = f"{self.step} {self.name}".strip()
        return [label, [child.tree() for child in self.children]] if self.children else [label]


_CURRENT: ContextVar[Recorded | None] = ContextVar("current", default=None)


class RecordingSpan:
    def __init__(self, tracer: RecordingTracer, record: Recorded) -> None:
        self.tracer, self.recorded = tracer, record

    def record(self, *facts: Fact) -> None:
        self.recorded.facts += facts

    def __enter__(self) -> RecordingSpan:
        with self.tracer.lock:
            parent = self.recorded.parent
            (parent.children if parent is not None else self.tracer.roots).append(
                self.recorded)
        self.recorded.thread = threading.current_thread().name
        self._token = _CURRENT.set(self.recorded)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        self.recorded.error = error
        _CURRENT.reset(self._token)
        return self.tracer.swallow  # a tracer that tries to swallow the step's error


class RecordingTracer:
    """Keeps the span tree, parents found the way OpenTelemetry finds them: a context
    variable."""

    def __init__(self, swallow: bool = False) -> None:
        self.roots: list[Recorded] = []
        self.lock = threading.Lock()
        self.swallow = swallow

    def span(self, step: Step, name: str = "", *facts: Fact) -> AbstractContextManager[Span]:
        return RecordingSpan(self, Recorded(step, name, _CURRENT.get(), list(facts)))


def _weather(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return f"sunny in {arguments['city']}"


def _engine(store: SQLiteStore, model: ScriptedModel, tracer: Any) -> Engine:
    tools = [Tool("weather", "Weather for a city.", CITY, _weather),
             Tool("time", "Time in a city.", CITY, lambda a, c: "noon")]
    return standard_engine(store, model, tools=tools, tracer=tracer)


def test_each_step_of_a_turn_runs_in_a_span_nested_as_the_steps_are(
        store: SQLiteStore) -> None:
    tracer = RecordingTracer()
    model = ScriptedModel([ToolCalls.of(("weather", {"city": "Oslo"}),
                                        ("time", {"city": "Oslo"})), "It is sunny."])
    result = _engine(store, model, tracer).run_turn("Weather in Oslo?")
    [turn] = tracer.roots
    assert turn.tree() == ["turn", [
        ["provider working state"], ["provider memory"], ["ingest"],
        ["model_call scripted"], ["commit tool_calls"],
        ["tool_call weather"], ["tool_call time"],
        ["model_call scripted"], ["commit reply"]]]
    tools = [s for s in turn.children if s.step is Step.TOOL_CALL]
    assert {s.thread for s in tools} != {threading.current_thread().name}  # pool threads
    # what each span was handed: the engine's own values
    assert [type(f) for f in turn.facts] == [type(turn.facts[0]), TurnResult]
    assert turn.facts[-1] == result
    ingest = turn.children[2]
    assert [f.seq for f in ingest.facts if isinstance(f, Item)] == [result.message.seq]
    calls = [s for s in turn.children if s.step is Step.MODEL_CALL]
    for span in calls:
        kinds = {type(f).__name__ for f in span.facts}
        assert {"Request", "Item", "CallOutcome", "PrefixReport"} <= kinds
    assert [f for f in turn.children[-1].facts if isinstance(f, ModelCall)][0].id == \
        result.call.id
    assert all(isinstance(f, NewItem) for s in tools for f in s.facts[1:])
    assert all(s.error is None for s in [turn, *turn.children])


def test_a_failed_call_ends_its_spans_with_the_error(store: SQLiteStore) -> None:
    tracer = RecordingTracer()
    model = ScriptedModel([RuntimeError("backend down")])
    with pytest.raises(ModelCallFailed):
        _engine(store, model, tracer).run_turn("hello")
    [turn] = tracer.roots
    assert [c.tree()[0] for c in turn.children] == [
        "provider working state", "provider memory", "ingest", "model_call scripted",
        "commit failed_call"]
    call = turn.children[3]
    outcome = next(f for f in call.facts if isinstance(f, CallOutcome))
    assert isinstance(outcome.error, RuntimeError)
    assert isinstance(turn.error, ModelCallFailed)


def test_a_refused_turn_has_a_turn_span_and_nothing_under_it(store: SQLiteStore) -> None:
    tracer = RecordingTracer()
    with pytest.raises(InputError):
        _engine(store, ScriptedModel(), tracer).run_turn("x" * 10_000_000)
    [turn] = tracer.roots
    assert turn.children == [] and isinstance(turn.error, InputError)


def test_answer_is_a_turn_without_an_ingest(store: SQLiteStore) -> None:
    tracer = RecordingTracer()
    engine = _engine(store, ScriptedModel([RuntimeError("down"), "fine"]), tracer)
    with pytest.raises(ModelCallFailed):
        engine.run_turn("hello")
    cid = store.conversations()[0].conversation.id
    engine.answer(cid)
    assert tracer.roots[1].tree() == ["turn", [
        ["provider working state"], ["provider memory"], ["model_call scripted"],
        ["commit reply"]]]


def test_a_tracer_cannot_swallow_the_error_of_a_step(store: SQLiteStore) -> None:
    with pytest.raises(ModelCallFailed):
        _engine(store, ScriptedModel([RuntimeError("down")]),
                RecordingTracer(swallow=True)).run_turn("hello")


class Breaking:
    """A tracer that raises wherever it is asked to."""

    def __init__(self, where: str) -> None:
        self.where = where

    def span(self, step: Step, name: str = "", *facts: Fact) -> AbstractContextManager[Span]:
        if self.where == "open":
            raise RuntimeError("tracer broken at open")
        return BreakingSpan(self.where)


class BreakingSpan:
    def __init__(self, where: str) -> None:
        self.where = where

    def record(self, *facts: Fact) -> None:
        if self.where == "record":
            raise RuntimeError("tracer broken at record")

    def __enter__(self) -> BreakingSpan:
        if self.where == "enter":
            raise RuntimeError("tracer broken at enter")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.where == "exit":
            raise RuntimeError("tracer broken at exit")


@pytest.mark.parametrize("where", ["open", "enter", "record", "exit"])
def test_a_tracer_that_raises_never_fails_a_turn(store: SQLiteStore, where: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    def script() -> ScriptedModel:
        return ScriptedModel([ToolCalls.of(("weather", {"city": "Oslo"})), "sunny"])

    untraced = _engine(store, script(), None).run_turn("Weather?")
    with caplog.at_level(logging.ERROR, logger="threadline.trace"):
        result = _engine(store, script(), Breaking(where)).run_turn("Weather?")
    assert result.reply.text == "sunny"
    assert [r.content["output"] for r in result.tool_results] == ["sunny in Oslo"]
    assert f"tracer broken at {where}" in caplog.text
    # and the turn wrote what it would have without a tracer: no note, nothing else
    assert [i.kind for i in store.history(result.conversation_id)] == \
        [i.kind for i in store.history(untraced.conversation_id)]


def test_without_a_tracer_the_engine_uses_the_quiet_one(store: SQLiteStore) -> None:
    assert Engine(store, ScriptedModel()).tracer is QUIET
    assert guarded(None) is QUIET
    with QUIET.span(Step.TURN) as span:
        span.record()


class Answering(Provider):
    """A provider that answers every turn itself, with an answer a call gave before."""

    name = "answers"

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id

    def gather(self, found: Gathering) -> NewItem | None:
        return self.context_item(found=True)

    def serve(self, item: Item, found: Gathering) -> Served | None:
        return Served("asked and answered", {"call_id": self.call_id})


def test_a_turn_a_provider_answers_commits_without_a_model_call(store: SQLiteStore) -> None:
    first = Engine(store, ScriptedModel()).run_turn("hello")
    tracer = RecordingTracer()
    engine = Engine(store, ScriptedModel(), providers=[Answering(first.call.id)],
                    tracer=tracer)
    result = engine.run_turn("hello again", conversation_id=first.conversation_id)
    assert result.reply.text == "asked and answered"
    [turn] = tracer.roots
    assert turn.tree() == ["turn", [["provider answers"], ["ingest"], ["commit served"]]]
    found = turn.children[0].facts
    assert [type(f) for f in found] == [NewItem]
    assert turn.children[-1].facts == [result.reply]
