"""The turn-hook seam: what follows a committed turn sees it whole and can never fail it."""

from __future__ import annotations

import pytest

from threadline.engine import Engine
from threadline.errors import ModelCallFailed
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel, ToolCalls
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.hooks import TurnEvent
from threadline.turn.tools import Tool


class Recorder:
    name = "recorder"
    uses_user = False

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []

    def after_turn(self, event: TurnEvent) -> None:
        self.events.append(event)


class Broken:
    name = "broken"
    uses_user = False

    def after_turn(self, event: TurnEvent) -> None:
        raise RuntimeError("exporter unreachable")


CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_a_hook_sees_the_committed_items_every_call_and_the_prefix_report(
        store: SQLiteStore) -> None:
    recorder = Recorder()
    model = ScriptedModel([ToolCalls.of(("weather", {"city": "Oslo"}))],
                          default=lambda request: "Take an umbrella.")
    weather = Tool("weather", "The weather.", CITY, lambda args, ctx: "rain")
    engine = Engine(store, model, tools=[weather], hooks=[recorder])
    first = engine.run_turn("Umbrella?")
    second = engine.run_turn("Thanks", conversation_id=first.conversation_id)
    assert [e.result for e in recorder.events] == [first, second]
    event = recorder.events[0]
    assert event.error is None and event.message == first.message
    assert [i.kind for i in event.items] == [ItemKind.USER, ItemKind.TOOL_CALL,
                                             ItemKind.TOOL_RESULT, ItemKind.ASSISTANT]
    assert [c.id for c in event.calls] == [c.id for c in store.calls(first.conversation_id)
                                           if c.turn == first.turn]
    assert event.calls[-1].id == first.call.id and len(event.calls) == 2
    later = recorder.events[1].prefix
    assert later is not None and later.cause == "append_only"


def test_a_failing_hook_is_recorded_and_never_fails_the_turn(store: SQLiteStore) -> None:
    recorder = Recorder()
    engine = Engine(store, ScriptedModel(), hooks=[Broken(), recorder])
    result = engine.run_turn("Hello")
    assert result.reply.text  # the turn returned as it would have
    assert len(recorder.events) == 1  # the hooks after the broken one still ran
    note = store.history(result.conversation_id)[-1]
    assert note.kind is ItemKind.NOTE and note.content["hook"] == "broken"
    assert note.content["error"] == "RuntimeError: exporter unreachable"
    # a note is not a message: the next request is the same as without it
    assert all("exporter" not in m.content for m in
               engine.request_for(result.conversation_id).messages)
    follow = engine.run_turn("Again", conversation_id=result.conversation_id)
    assert follow.call.prefix is not None and follow.call.prefix["cause"] == "append_only"


def test_hooks_see_a_turn_that_failed_after_its_message_was_written(
        store: SQLiteStore) -> None:
    recorder = Recorder()
    engine = Engine(store, ScriptedModel([RuntimeError("provider down")]), hooks=[recorder])
    with pytest.raises(ModelCallFailed):
        engine.run_turn("Hello")
    [event] = recorder.events
    assert event.result is None and isinstance(event.error, ModelCallFailed)
    assert event.message.text == "Hello"
    assert [c.status.value for c in event.calls] == ["failed"]
