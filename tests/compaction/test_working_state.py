"""The working-state record: structured, in the log, in the tail, untouched by compaction."""

from __future__ import annotations

import pytest

from threadline.compaction.auto import Compaction
from threadline.compaction.plan import Policy
from threadline.compaction.working_state import (
    UPDATE_TOOL,
    WorkingState,
    apply_tool_call,
    state_of,
    update,
    update_state,
)
from threadline.errors import InputError
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore


def test_updates_replace_append_move_and_resolve() -> None:
    state = update(WorkingState(), {
        "goal": "Migrate billing to v2",
        "add_steps": ["export invoices", {"text": "switch writes", "status": "todo"}],
        "add_decisions": [{"decision": "keep v1 read-only", "reason": "audit needs it"}],
        "add_facts": [{"fact": "41,200 invoices", "source": "tool count_invoices"}],
        "add_questions": ["Who signs off?", "Which region first?"]})
    state = update(state, {"step_status": {"index": 1, "status": "done"},
                           "resolve": ["Who signs off?"]})
    assert [s["status"] for s in state.steps] == ["done", "todo"]
    assert state.questions == ("Which region first?",)
    text = state.render()
    assert "Goal: Migrate billing to v2" in text and "1. [done] export invoices" in text
    assert "keep v1 read-only (because audit needs it)" in text
    assert "41,200 invoices (source: tool count_invoices)" in text


@pytest.mark.parametrize("changes, message", [
    ({"colour": "red"}, "unknown working-state field"),
    ({"goal": "  "}, "goal must be non-empty"),
    ({"add_steps": [{"text": "x", "status": "maybe"}]}, "unknown step status"),
    ({"step_status": {"index": 3, "status": "done"}}, "there is no step 3"),
    ({"add_decisions": [{"decision": "x"}]}, "add_decisions.reason"),
    ({"add_facts": "not a list"}, "must be a list"),
])
def test_bad_updates_say_what_is_wrong(changes: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        update(WorkingState(), changes)


def test_the_tool_returns_a_structured_error_the_model_can_fix() -> None:
    state, reply = apply_tool_call(WorkingState(), {"add_steps": [{"text": "a",
                                                                   "status": "soon"}]})
    assert state is None and reply.startswith("error: unknown step status")
    state, reply = apply_tool_call(WorkingState(), {"goal": "Ship it"})
    assert state is not None and state.goal == "Ship it" and "Goal: Ship it" in reply
    assert UPDATE_TOOL.to_openai()["function"]["name"] == "update_working_state"


def test_the_state_is_logged_shown_in_the_tail_and_survives_compaction(
        store: SQLiteStore) -> None:
    engine = standard_engine(store, ScriptedModel())
    cid = engine.run_turn("Let's plan the migration.").conversation_id
    update_state(store, cid, {"goal": "Migrate billing", "add_steps": ["export"]})
    update_state(store, cid, {"step_status": {"index": 1, "status": "doing"}})
    states = [i for i in store.history(cid) if i.kind is ItemKind.WORKING_STATE]
    assert len(states) == 2  # every version stays in the log
    for n in range(6):
        engine.run_turn(f"Step detail {n}: " + "the export covers invoices " * 10,
                        conversation_id=cid)
    before = engine.request_for(cid)
    assert "[doing] export" in before.messages[-1].content  # the tail, at the end
    Compaction().compact(engine, cid, budget=100)
    after = engine.request_for(cid)
    assert "[doing] export" in after.messages[-1].content
    assert state_of(store.history(cid)).goal == "Migrate billing"
    bad = store.history(cid)
    with pytest.raises(InputError):
        update_state(store, cid, {"step_status": {"index": 9, "status": "done"}})
    assert store.history(cid) == bad


def test_a_state_change_does_not_move_the_cached_prefix(store: SQLiteStore) -> None:
    engine = standard_engine(store, ScriptedModel(),
                             policy=Policy(high_water=10_000, low_water=5_000))
    cid = engine.run_turn("Hello").conversation_id
    update_state(store, cid, {"goal": "A"})
    engine.run_turn("Next", conversation_id=cid)
    update_state(store, cid, {"goal": "B"})
    result = engine.run_turn("And then?", conversation_id=cid)
    assert result.call.prefix is not None and result.call.prefix["expected"]
