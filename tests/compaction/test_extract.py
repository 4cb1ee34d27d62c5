"""Model-assisted constraint extraction: the model points at the user's words or is ignored,
and any failure leaves the conversation uncompacted and working."""

from __future__ import annotations

import pytest

from threadline.calls import CallStatus
from threadline.compaction.auto import Compaction
from threadline.compaction.constraints import active
from threadline.compaction.extract import ExtractionFailed, extract
from threadline.compaction.plan import Policy
from threadline.engine import Engine
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.stores.sqlite import SQLiteStore

SAID = ("We are planning the Q3 offsite in Porto for 40 people. Oh, and the whole "
        "conversation should stay in Portuguese where possible, thanks.")


EXTRACTING = Compaction(Policy(high_water=100_000, low_water=50_000), model_extraction=True)


def _setup(store: SQLiteStore, model: ScriptedModel) -> tuple[Engine, str]:
    engine = Engine(store, model, compactor=EXTRACTING)
    cid = engine.run_turn(SAID).conversation_id
    for n in range(3):
        engine.run_turn(f"Day {n}: venue options near Ribeira, budget 9,000 EUR." * 3,
                        conversation_id=cid)
    return engine, cid


def test_only_verbatim_proposals_become_constraints(store: SQLiteStore) -> None:
    model = ScriptedModel()
    engine, cid = _setup(store, model)
    model.enqueue("- the whole conversation should stay in Portuguese where possible\n"
                  "- Always be cheerful.")  # the second line is not the user's
    done = EXTRACTING.compact(engine, cid, budget=200)
    assert done.applied is not None
    [rule] = active(store.history(cid))
    assert (rule.text, rule.source, rule.from_seq) == (
        "the whole conversation should stay in Portuguese where possible", "model", 1)
    assert rule.seq in done.applied.content["pinned"]
    side = [c for c in store.calls(cid) if c.purpose == "compaction"]
    assert len(side) == 1 and side[0].status is CallStatus.OK
    # the next turn is still compared with the previous turn, not with the side call
    result = engine.run_turn("And the dinner?", conversation_id=cid)
    assert result.call.prefix is not None and result.call.prefix["cause"] == "compaction_reset"


def test_a_failed_extraction_leaves_the_view_uncompacted(store: SQLiteStore) -> None:
    model = ScriptedModel()
    engine, cid = _setup(store, model)
    before = engine.request_for(cid)
    model.enqueue(RuntimeError("model crashed"))
    done = EXTRACTING.compact(engine, cid, budget=200)
    assert done.applied is None and "constraint extraction failed" in done.detail
    assert engine.request_for(cid) == before
    notes = [i for i in store.history(cid) if i.kind is ItemKind.NOTE]
    assert notes[-1].content["failure"] == "extraction"
    assert [c.status for c in store.calls(cid) if c.purpose == "compaction"] == [
        CallStatus.FAILED]
    assert engine.run_turn("Still there?", conversation_id=cid).reply.text  # keeps working


def test_malformed_output_and_a_passed_deadline_are_failures(store: SQLiteStore) -> None:
    model = ScriptedModel()
    engine, cid = _setup(store, model)
    model.enqueue("Sure! Here you go: Portuguese.")
    assert EXTRACTING.compact(engine, cid, budget=200).applied is None
    slow = ScriptedModel(token_delay_s=0.01)
    slow.enqueue("- " + "word " * 50)
    history = store.history(cid)
    with pytest.raises(ExtractionFailed, match="deadline"):
        extract(store, slow, history, "main", clock=engine.clock, deadline_s=0.05)
    failed = [c for c in store.calls(cid) if c.purpose == "compaction"]
    assert [c.status for c in failed] == [CallStatus.FAILED, CallStatus.FAILED]
    assert "malformed" in (failed[0].error or "")
