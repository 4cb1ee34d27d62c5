"""Compaction through the engine: a recorded event, an expected reset, nothing lost."""

from __future__ import annotations

import json

import pytest

from threadline.compaction.auto import Compaction
from threadline.compaction.constraints import active, add_constraint, remove_constraint
from threadline.compaction.plan import Policy
from threadline.engine import Engine
from threadline.errors import InputError, ModelCallFailed
from threadline.interop.importers import import_transcripts
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.stores.verify import verify_conversation

FILLER = " Details follow:" + " the shipment data is long" * 12


def _chat(engine: Engine, turns: int, cid: str | None = None) -> str:
    for n in range(turns):
        result = engine.run_turn(f"Turn {n}: check invoice INV-{n:03d} for FY2025.{FILLER}",
                                 conversation_id=cid)
        cid = result.conversation_id
    assert cid is not None
    return cid


def test_the_high_water_mark_compacts_once_and_the_next_turn_appends(store: SQLiteStore) -> None:
    engine = standard_engine(store, ScriptedModel(), system="You are terse.",
                             policy=Policy(high_water=900, low_water=400, profile="none"))
    cid = engine.run_turn("Always use British spelling. Order A-1234 is mine.").conversation_id
    _chat(engine, 8, cid)
    calls = store.calls(cid)
    causes = [c.prefix["cause"] for c in calls if c.prefix]
    assert "compaction_reset" in causes
    reset = causes.index("compaction_reset")
    # every call after the reset reuses the previous request whole until the next reset
    assert all(c in ("append_only", "compaction_reset") for c in causes[reset:])
    assert all(c.prefix["expected"] for c in calls if c.prefix)
    history = store.history(cid)
    compactions = [i for i in history if i.kind is ItemKind.COMPACTION]
    assert compactions and compactions[0].content["reason"] == "high_water"
    # the rule the user set is pinned verbatim, and the log lost nothing
    request = engine.request_for(cid)
    assert request.messages[1].content == ("Standing instructions:\n- Always use British "
                                           "spelling.")
    assert sum(1 for i in history if i.kind is ItemKind.USER) == 9
    assert verify_conversation(store, cid) == []
    assert "A-1234" in "".join(m.content for m in request.messages)


def test_a_plan_that_does_not_pay_for_itself_waits_until_the_hard_limit(
        store: SQLiteStore) -> None:
    # with cache reads at a tenth of the price, compacting a short context never pays off
    engine = standard_engine(store, ScriptedModel(), policy=Policy(
        high_water=300, low_water=150, profile="anthropic-5m", context_window=10_000,
        reserve=100))
    cid = _chat(engine, 4)
    assert not any(i.kind is ItemKind.COMPACTION for i in store.history(cid))
    engine.compactor = Compaction(Policy(high_water=300, low_water=150,
                                         profile="anthropic-5m", context_window=700,
                                         reserve=100))
    _chat(engine, 1, cid)
    [event] = [i for i in store.history(cid) if i.kind is ItemKind.COMPACTION]
    assert event.content["reason"] == "context_limit"


def test_manual_compaction_dry_run_changes_nothing(store: SQLiteStore) -> None:
    engine = Engine(store, ScriptedModel())
    cid = _chat(engine, 5)
    before = store.history(cid)
    dry = Compaction().compact(engine, cid, budget=200, dry_run=True)
    assert dry.plan is not None and dry.applied is None and store.history(cid) == before
    done = Compaction().compact(engine, cid, budget=200)
    assert done.applied is not None and done.plan == dry.plan  # the dry run said what happens
    assert done.plan is not None and done.plan.tokens_after < done.plan.tokens_before
    assert json.loads(json.dumps(done.to_json()))["applied"] is True


def test_a_cleared_tool_result_is_recalled_verbatim(store: SQLiteStore) -> None:
    from threadline.items import NewItem
    from threadline.stores.base import Commit
    engine = Engine(store, ScriptedModel())
    cid = engine.run_turn("Look up the fare rules.").conversation_id
    outputs = [f"fare rule {n}: " + "refundable within 24h " * 40 for n in range(5)]
    for n, output in enumerate(outputs):
        head = store.head(cid)
        assert head is not None
        store.commit(Commit(conversation_id=cid, created_at=head.created_at,
                            expected_head=head.seq,
                            items=[NewItem.tool_call(f"t{n}", "rules", {"n": n}),
                                   NewItem.tool_result(f"t{n}", output)]))
    done = Compaction().compact(engine, cid, strategy="clear_tool_results")
    assert done.plan is not None and len(done.plan.cleared) == 2  # the newest 3 stay
    shown = [m.content for m in engine.request_for(cid).messages if m.role == "tool"]
    assert shown[2:] == outputs[2:] and all("fetch_item(" in s for s in shown[:2])
    assert engine.item(cid, done.plan.cleared[0]).content["output"] == outputs[0]


def test_a_failed_call_after_a_compaction_can_be_answered(store: SQLiteStore) -> None:
    model = ScriptedModel()
    engine = standard_engine(store, model,
                             policy=Policy(high_water=500, low_water=200, profile="none"))
    cid = _chat(engine, 3)
    model.enqueue(RuntimeError("provider down"))
    with pytest.raises(ModelCallFailed):
        engine.run_turn(f"One more question about INV-999.{FILLER}", conversation_id=cid)
    head = store.head(cid)
    assert head is not None and head.kind is ItemKind.COMPACTION
    result = engine.answer(cid)
    assert result.message.text.startswith("One more question") and result.reply.seq > head.seq


def test_constraints_can_be_added_edited_and_removed(store: SQLiteStore) -> None:
    engine = Engine(store, ScriptedModel())
    cid = engine.run_turn("Hello").conversation_id
    added = add_constraint(store, cid, "Quote prices in EUR.")
    edited = add_constraint(store, cid, "Quote prices in GBP.", replaces=added.seq)
    assert [c.text for c in active(store.history(cid))] == ["Quote prices in GBP."]
    tail = engine.request_for(cid).messages[-1].content
    assert "Quote prices in GBP." in tail and "EUR" not in tail
    remove_constraint(store, cid, edited.seq)
    assert active(store.history(cid)) == []
    before = store.history(cid)
    for bad in (lambda: remove_constraint(store, cid, edited.seq),
                lambda: add_constraint(store, cid, "x", replaces=1),
                lambda: add_constraint(store, cid, "   ")):
        with pytest.raises(InputError):
            bad()
    assert store.history(cid) == before


def test_an_imported_conversation_compacts_like_a_native_one(store: SQLiteStore) -> None:
    messages = [{"role": "user", "content": "From now on, answer in French."},
                {"role": "assistant", "content": "D'accord."}]
    for n in range(6):
        messages += [{"role": "user", "content": f"Price of item SKU-{n}?{FILLER}"},
                     {"role": "assistant", "content": f"SKU-{n} costs {n}0 EUR.{FILLER}"}]
    report = import_transcripts(store, json.dumps(messages).encode(), "openai-messages",
                                max_message_bytes=100_000)
    cid = report.imported[0]["conversation_id"]
    engine = Engine(store, ScriptedModel())
    done = Compaction().compact(engine, cid, budget=300)
    assert done.applied is not None and done.plan is not None
    assert [c.text for c in active(store.history(cid))] == ["From now on, answer in French."]
    request = engine.request_for(cid)
    assert request.messages[0].content == ("Standing instructions:\n- From now on, answer in "
                                           "French.")
    assert "SKU-0" in request.messages[1].content  # the summary keeps identifiers


def test_an_explicit_task_boundary_summarises_the_finished_task(store: SQLiteStore) -> None:
    engine = Engine(store, ScriptedModel())
    cid = _chat(engine, 4)
    done = Compaction().compact(engine, cid, boundary=True)
    assert done.plan is not None and done.applied is not None
    assert (done.plan.strategy, done.plan.reason) == ("summary", "task_boundary")
    last = [i for i in store.history(cid) if i.kind is ItemKind.ASSISTANT][-1]
    assert done.plan.through_seq == last.seq  # every completed turn is summarised
    summary = engine.request_for(cid).messages[0].content
    assert all(f"INV-{n:03d}" in summary for n in range(4))


def test_a_detected_change_of_task_compacts_the_finished_one(store: SQLiteStore) -> None:
    engine = standard_engine(store, ScriptedModel(), policy=Policy(high_water=50_000,
                                                                   low_water=300,
                                                                   profile="none"))
    cid = _chat(engine, 4)
    result = engine.run_turn("New task: draft the release notes for v2.3.", conversation_id=cid)
    [event] = [i for i in store.history(cid) if i.kind is ItemKind.COMPACTION]
    assert event.content["reason"] == "task_boundary"
    assert event.content["through_seq"] == result.message.seq - 1
    assert event.seq > result.message.seq  # recorded after the message, before the call
    request = engine.request_for(cid)
    assert "INV-003" in request.messages[0].content  # the old task, summarised


def test_the_fetch_item_tool_returns_an_item_or_an_error_the_model_can_use(
        store: SQLiteStore) -> None:
    from threadline.compaction.clear_tools import FETCH_ITEM_TOOL, fetch_item
    engine = Engine(store, ScriptedModel())
    cid = engine.run_turn("Remember the code word: AZURE-17.").conversation_id
    assert fetch_item(store, cid, {"item": 1}) == "Remember the code word: AZURE-17."
    assert fetch_item(store, cid, {"item": 99}).startswith("error: there is no item 99")
    assert fetch_item(store, cid, {"item": "1"}).startswith("error: fetch_item needs")
    assert FETCH_ITEM_TOOL.to_openai()["function"]["parameters"]["required"] == ["item"]
