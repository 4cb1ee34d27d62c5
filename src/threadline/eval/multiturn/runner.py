"""Running a config: every task × condition × arm × trial, each a threadline conversation
(an arm runs under the conditions its config gives it, by default all).

Each trial is a new conversation in the run's own store, driven through ``Engine.run_turn``
like any other: the user's messages and the model's replies are log items, each call is
recorded with its exact request, usage, timings and prefix report. After each reply the
grader labels it (answer attempt, clarification, discussion) and grades an attempt; the
trial stops at the first correct answer or when the condition's turns run out. A turn that
fails (a model error, a context window exceeded) ends its trial with the error recorded and
a score of 0; the run goes on.

Trial ``i`` of a task has the same seed in every condition and arm (derived from the run's
seed, the task and ``i``), so conditions and arms compare paired.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadline.errors import ThreadlineError
from threadline.eval.multiturn import code_tests, graders
from threadline.eval.multiturn.arms import Arm
from threadline.eval.multiturn.backends import EvalModel
from threadline.eval.multiturn.conditions import Condition, turn_count, user_turns
from threadline.eval.multiturn.config import RunConfig
from threadline.eval.multiturn.records import (
    TrialRecord,
    TurnRecord,
    append_trial,
    recording,
    start_run,
)
from threadline.eval.multiturn.simulators import ModelSimulator, ShardRevealer, UserSimulator
from threadline.eval.multiturn.tasks import Task
from threadline.items import format_time, utc_now
from threadline.stores.base import Store
from threadline.version import __version__

Progress = Callable[[TrialRecord], None]


def trial_seed(seed: int, task_id: str, trial: int) -> int:
    digest = hashlib.blake2b(f"{seed}\n{task_id}\n{trial}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True)
class Plan:
    """What a run will do, known before it starts (the progress bar's length)."""

    tasks: tuple[Task, ...]
    conditions: tuple[Condition, ...]
    arms: tuple[Arm, ...]
    k: int

    def arms_for(self, condition: Condition) -> tuple[Arm, ...]:
        return tuple(arm for arm in self.arms if condition in arm.conditions)

    @property
    def trials(self) -> int:
        return len(self.tasks) * sum(map(len, map(self.arms_for, self.conditions))) * self.k


def plan(config: RunConfig, tasks: Sequence[Task]) -> Plan:
    return Plan(tuple(tasks), config.conditions, config.arms, config.k)


def simulator_for(config: RunConfig, assistant: EvalModel,
                  own: EvalModel | None = None) -> UserSimulator:
    if config.simulator.kind == ModelSimulator.name:
        return ModelSimulator((own or assistant).model)
    return ShardRevealer()


def run(config: RunConfig, run_dir: Path, the_plan: Plan, model: EvalModel,
        simulator: UserSimulator, *, skipped: Sequence[Any] = (),
        progress: Progress | None = None) -> dict[str, Any]:
    """Run every trial of ``the_plan`` into ``run_dir``; the manifest says how it ended."""
    manifest: dict[str, Any] = {
        "id": run_dir.name, "threadline": __version__, "config_digest": config.digest,
        "status": "running", "started_at": format_time(utc_now()), "finished_at": None,
        "task_ids": [t.id for t in the_plan.tasks],
        "unsupported": [{"id": s.id, "kind": s.kind, "reason": s.reason} for s in skipped],
        "conditions": [str(c) for c in the_plan.conditions],
        "arms": [arm.record() for arm in the_plan.arms], "k": the_plan.k, "seed": config.seed,
        "model": model.record(config.model), "simulator": simulator.record(),
        "judge": {"kind": config.judge}, "grader_version": graders.GRADER_VERSION,
        "code_isolation": code_tests.isolation() if any(
            t.kind == "code" for t in the_plan.tasks) else None,
        "pricing": {"profile": config.price_profile, "input_price": config.input_price,
                    "output_price": config.output_price},
        "metrics": {"bootstrap": config.bootstrap, "confidence": config.confidence},
    }
    start_run(run_dir, manifest, the_plan.tasks, config.text)
    with recording(run_dir, manifest) as store:
        for task in the_plan.tasks:
            for condition in the_plan.conditions:
                for arm in the_plan.arms_for(condition):
                    for trial in range(the_plan.k):
                        record = run_trial(store, model, simulator, arm, task, condition,
                                           trial, trial_seed(config.seed, task.id, trial))
                        append_trial(run_dir, record)
                        if progress is not None:
                            progress(record)
    return manifest


def run_trial(store: Store, model: EvalModel, simulator: UserSimulator, arm: Arm, task: Task,
              condition: Condition, trial: int, seed: int) -> TrialRecord:
    """One simulated conversation, graded as it goes."""
    record = TrialRecord(task.id, task.kind, str(condition), arm.name, trial, seed)
    started = time.perf_counter()
    engine = arm.engine(store, model.model, system=task.system,
                        turns=turn_count(condition, task))
    model.reseed(seed)
    transcript: list[tuple[str, str]] = []
    try:
        for index, turn in enumerate(user_turns(condition, task, simulator, transcript), 1):
            result = engine.run_turn(turn.text, conversation_id=record.conversation_id)
            record.conversation_id = result.conversation_id
            transcript += [("user", turn.text), ("assistant", result.reply.text or "")]
            grade = graders.grade(task, result.reply.text or "")
            record.turns.append(TurnRecord(index, turn.kind, turn.shards, result.message.seq,
                                           result.reply.seq, result.call.id, grade,
                                           turn.fallback))
            if grade.correct:
                break
    except ThreadlineError as err:  # the trial ends here, scored 0; the run goes on
        record.error = f"{type(err).__name__}: {err}"
    record.elapsed_s = round(time.perf_counter() - started, 4)
    return record
