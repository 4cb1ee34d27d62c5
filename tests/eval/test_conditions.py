"""The five conditions' turn sequences, and a run stopping at the first correct answer."""

from __future__ import annotations

from pathlib import Path

from threadline.eval.multiturn.arms import Plain
from threadline.eval.multiturn.backends import EvalModel
from threadline.eval.multiturn.conditions import Condition, user_turns
from threadline.eval.multiturn.runner import run_trial
from threadline.eval.multiturn.simulators import ModelSimulator, ShardRevealer
from threadline.eval.multiturn.tasks import load_tasks
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.request import Request
from threadline.stores.sqlite import SQLiteStore

DATA = Path(__file__).parent / "data" / "sharded_tasks.json"
MATH = next(t for t in load_tasks(DATA)[0] if t.kind == "math")
SHARDS = [s.text for s in MATH.shards]


def turns(condition: Condition) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(t.kind, t.text, t.shards) for t in user_turns(condition, MATH, ShardRevealer(), [])]


def test_full_and_concat_are_one_turn() -> None:
    assert turns(Condition.FULL) == [("full", MATH.full, (1, 2, 3, 4))]
    (kind, text, shards), = turns(Condition.CONCAT)
    assert (kind, shards) == ("concat", (1, 2, 3, 4))
    assert text.splitlines() == [SHARDS[0], *(f"- {s}" for s in SHARDS[1:])]


def test_sharded_reveals_one_shard_per_turn_verbatim() -> None:
    assert turns(Condition.SHARDED) == [("shard", s, (i,)) for i, s in enumerate(SHARDS, 1)]


def test_recap_adds_a_turn_restating_every_shard() -> None:
    sequence = turns(Condition.RECAP)
    assert sequence[:-1] == turns(Condition.SHARDED)
    kind, text, shards = sequence[-1]
    assert kind == "recap" and shards == () and MATH.concat() in text


def test_snowball_restates_everything_said_before() -> None:
    sequence = turns(Condition.SNOWBALL)
    assert sequence[0] == ("shard", SHARDS[0], (1,))
    last = sequence[-1][1]
    assert all(f"- {s}" in last for s in SHARDS[:-1]) and last.endswith(SHARDS[-1])


def test_the_model_simulator_phrases_the_shard_and_falls_back_when_it_cannot() -> None:
    model = ScriptedModel(["the baker bakes a dozen a day", ""])
    simulator = ModelSimulator(model)
    first, second = list(user_turns(Condition.SHARDED, MATH, simulator, []))[:2]
    assert first.text == "the baker bakes a dozen a day" and not first.fallback
    assert second.text == SHARDS[1] and second.fallback  # it said nothing: the shard verbatim
    record = simulator.record()
    assert record["model"] == "scripted" and record["prompt_hash"].startswith("b2:")


def _answers_once_told_everything(request: Request) -> str:
    said = request.messages[-1].content
    return "So the baker sold **56** loaves." if "all but 4" in said else "Tell me more?"


def test_a_trial_stops_at_the_first_correct_answer(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    model = EvalModel(ScriptedModel(default=_answers_once_told_everything))
    trial = run_trial(store, model, ShardRevealer(), Plain(), MATH, Condition.RECAP, 0, 7)
    assert trial.correct and trial.error is None
    assert [t.kind for t in trial.turns] == ["shard"] * 4  # correct at shard 4: no recap
    assert [t.grade.response_type for t in trial.turns] == ["clarification"] * 3 + [
        "answer_attempt"]
    # every turn is an ordinary conversation turn, recorded with its call
    history = store.history(trial.conversation_id or "")
    assert [i.text for i in history if i.kind is ItemKind.USER] == SHARDS
    assert store.call(trial.turns[-1].call_id).reply_seq == trial.turns[-1].reply_seq
    store.close()


def test_a_failing_model_ends_the_trial_with_the_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    model = EvalModel(ScriptedModel(["Go on?", RuntimeError("boom")]))
    trial = run_trial(store, model, ShardRevealer(), Plain(), MATH, Condition.SHARDED, 0, 1)
    assert not trial.correct and len(trial.turns) == 1 and "boom" in (trial.error or "")
    store.close()
