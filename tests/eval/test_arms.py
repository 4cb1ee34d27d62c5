"""Threadline's interventions as arms: each changes what the model is shown in the tail of the
turns it should (read back from the recorded call's request), leaves the prefix above the
tail where plain SHARDED has it, and compaction compacts at its budget."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from threadline.errors import InputError
from threadline.eval.multiturn.arms import (
    BaseArm,
    CompactionArm,
    GoalArm,
    Plain,
    RecapArm,
    WorkingStateArm,
)
from threadline.eval.multiturn.backends import EvalModel
from threadline.eval.multiturn.conditions import Condition, turn_count
from threadline.eval.multiturn.records import TrialRecord
from threadline.eval.multiturn.runner import run_trial
from threadline.eval.multiturn.simulators import ShardRevealer
from threadline.eval.multiturn.tasks import load_tasks
from threadline.models.scripted import ScriptedModel
from threadline.stores.sqlite import SQLiteStore

DATA = Path(__file__).parent / "data" / "sharded_tasks.json"
MATH = next(t for t in load_tasks(DATA)[0] if t.kind == "math")
SHARDS = [s.text for s in MATH.shards]
NEVER = "Could you tell me more about it?"  # never an answer: every shard is said


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "arms.db")
    yield opened
    opened.close()


def trial(store: SQLiteStore, arm: BaseArm, reply: str = NEVER) -> TrialRecord:
    model = EvalModel(ScriptedModel(default=lambda request: reply))
    record = run_trial(store, model, ShardRevealer(), arm, MATH, Condition.SHARDED, 0, 3)
    assert record.error is None and len(record.turns) == len(SHARDS)
    return record


def requests(store: SQLiteStore, record: TrialRecord) -> list[list[dict[str, Any]]]:
    """Each turn's request as it was sent (the recorded call's messages)."""
    out = []
    for turn in record.turns:
        sent = store.call(turn.call_id).request
        assert sent is not None
        out.append([dict(m) for m in sent.messages])
    return out


def tails(store: SQLiteStore, record: TrialRecord) -> list[str | None]:
    """Each turn's tail: the user message between the history and the new message, if any."""
    out: list[str | None] = []
    for turn, messages in zip(record.turns, requests(store, record), strict=True):
        assert messages[-1] == {"role": "user", "content": SHARDS[turn.index - 1]}
        before = messages[-2]
        out.append(before["content"] if before["role"] == "user" else None)
    return out


def prefixes(store: SQLiteStore, record: TrialRecord) -> list[dict[str, Any]]:
    return [dict(store.call(turn.call_id).prefix or {}) for turn in record.turns]


def test_plain_shows_no_tail(store: SQLiteStore) -> None:
    record = trial(store, Plain())
    assert tails(store, record) == [None] * 4
    assert [p["cause"] for p in prefixes(store, record)[1:]] == ["append_only"] * 3


def test_working_state_shows_the_requirements_so_far_every_turn(store: SQLiteStore) -> None:
    shown = tails(store, trial(store, WorkingStateArm()))
    for n, tail in enumerate(shown, 1):
        assert tail is not None and tail.startswith("[working state]\n")
        assert f"Goal: {SHARDS[0]}" in tail
        for i, shard in enumerate(SHARDS[1:], 2):
            assert (f"{shard} (source: the user, turn {i})" in tail) == (i <= n)


def test_recap_shows_every_earlier_message_on_the_last_turn_only(store: SQLiteStore) -> None:
    arm = RecapArm()
    assert turn_count(Condition.SHARDED, MATH) == 4
    shown = tails(store, trial(store, arm))
    assert shown[:3] == [None] * 3
    assert shown[3] == "[recap: everything the user has said so far]\n" + "\n".join(
        f"- {s}" for s in SHARDS[:3])


@pytest.mark.parametrize(("every", "on"), [(2, {3}), (1, {2, 3, 4}), (3, {4}), (9, set())])
def test_goal_is_restated_every_n_turns(store: SQLiteStore, every: int, on: set[int]) -> None:
    shown = tails(store, trial(store, GoalArm(every=every)))
    assert shown == [f"[the task's goal, restated]\n{SHARDS[0]}" if n in on else None
                     for n in range(1, 5)]


@pytest.mark.parametrize("arm", [WorkingStateArm(), RecapArm(), GoalArm(every=1)],
                         ids=lambda a: a.kind)
def test_a_tail_arm_never_moves_the_prefix(store: SQLiteStore, arm: BaseArm) -> None:
    plain = requests(store, trial(store, Plain()))
    record = trial(store, arm)
    sent = requests(store, record)
    for n, (ours, theirs) in enumerate(zip(sent, plain, strict=True)):
        # what plain sends is ours too, with at most the tail inserted before the message
        assert [m for m in ours if m not in theirs] in ([], [ours[-2]]), n
        assert [m for m in ours if m in theirs] == theirs
    for n, report in enumerate(prefixes(store, record)[1:], 2):
        assert report["expected"], report
        # everything the previous request sent above its tail is reused
        previous = sent[n - 2]
        above = len(previous) - (2 if previous[-2]["role"] == "user" else 1)
        assert report["divergence"] is None or report["divergence"]["message"] >= above


def test_compaction_compacts_at_its_budget_and_pins_the_reset(store: SQLiteStore) -> None:
    long_reply = "Let me think about this step by step. " * 12  # about 100 tokens a turn
    arm = CompactionArm(budget=200, target=120)
    record = trial(store, arm, long_reply)
    sent = requests(store, record)
    summarised = [any(m["content"].startswith("Summary of the conversation so far")
                      for m in messages) for messages in sent]
    assert not summarised[0] and any(summarised)
    reports = prefixes(store, record)
    first = summarised.index(True)
    assert reports[first]["cause"] == "compaction_reset" and reports[first]["expected"]
    assert all(r["expected"] for r in reports)
    # what the user said survives the compaction: the summary keeps it whole
    summary = next(m["content"] for m in sent[first] if m["content"].startswith("Summary"))
    assert all(shard in summary for shard in SHARDS[:first - 1])
    # plain, with the same replies, never compacts and sends more
    plain = requests(store, trial(store, Plain(), long_reply))
    assert sum(map(len, plain)) > sum(map(len, sent))


def test_an_arm_records_its_kind_version_and_parameters() -> None:
    arm = CompactionArm("tight", (Condition.SHARDED,), budget=300)
    assert arm.record() | {"engine": ""} == {
        "name": "tight", "kind": "compaction", "version": "1", "engine": "",
        "params": {"budget": 300, "target": None, "summarize": True},
        "conditions": ["sharded"]}
    assert arm.policy().hard_limit == 300 and arm.policy().low_water == 150


def test_an_arm_refuses_a_parameter_its_kind_does_not_have() -> None:
    with pytest.raises(InputError, match="a goal arm has no parameter 'budget'"):
        GoalArm(budget=3)
