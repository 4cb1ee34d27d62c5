"""The evaluation harness's overhead per simulated turn, and re-grading the published logs.

What is measured
    overhead  SHARDED conversations of the math and actions tasks (code is left out: its
              grade is a sandboxed process, timed apart below), each trial run two ways in
              one process over the scripted model (which replies the same to both):

              bare     ``Engine.run_turn`` of the same user turns, one after the other, in a
                       new conversation: what the turns cost with no harness;
              harness  ``runner.run_trial``: the same turns from the condition and the shard
                       revealer, each reply classified and graded, then the trial's record
                       appended to trials.jsonl, as ``threadline eval run`` does.

              Each side has its own SQLite file (durability ``normal``, as runs use). The
              scripted reply is never a correct answer, so both sides send every shard.
              Rounds interleave the sides (the one that goes first alternates), after an
              untimed warm-up round. Reported: ms per turn on each side and the ratio
              harness ÷ bare of the summed times, plus the median of the per-round ratios.
              Target: ≤ 1.15.
    code      ms per graded code reply (the sandboxed test process), apart.
    rescore   ``validate`` over ``sim_logs_math.jsonl`` and ``sim_logs_actions.jsonl`` (the
              1,800 published conversations): seconds, and agreement with the logged grades
              (target ≥ 0.95 on math and actions). Skipped when the logs are not there.

    .venv/bin/python bench/eval_overhead.py            # full size
    .venv/bin/python bench/eval_overhead.py --quick    # smoke test, a few seconds
    .venv/bin/python bench/eval_overhead.py --json     # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from threadline.engine import Engine
from threadline.eval.multiturn import graders
from threadline.eval.multiturn.arms import Plain
from threadline.eval.multiturn.backends import EvalModel
from threadline.eval.multiturn.conditions import Condition, user_turns
from threadline.eval.multiturn.lic_logs import read_logs, validate
from threadline.eval.multiturn.records import append_trial
from threadline.eval.multiturn.runner import run_trial
from threadline.eval.multiturn.simulators import ShardRevealer
from threadline.eval.multiturn.tasks import Task, load_tasks
from threadline.models.scripted import ScriptedModel
from threadline.settings import Durability
from threadline.stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "lost-in-conversation"
SAMPLE = SHARED / "sharded_instructions_sample_5_per_task.json"
FIXTURE = ROOT / "tests" / "eval" / "data" / "sharded_tasks.json"


def bare(store: SQLiteStore, model: ScriptedModel, task: Task) -> tuple[float, int]:
    turns = [t.text for t in user_turns(Condition.SHARDED, task, ShardRevealer(), [])]
    engine = Engine(store, model, system=task.system)
    started = time.perf_counter()
    conversation = None
    for text in turns:
        conversation = engine.run_turn(text, conversation_id=conversation).conversation_id
    return time.perf_counter() - started, len(turns)


def harness(store: SQLiteStore, model: ScriptedModel, task: Task, run_dir: Path,
            trial: int) -> tuple[float, int]:
    started = time.perf_counter()
    record = run_trial(store, EvalModel(model), ShardRevealer(), Plain(), task,
                       Condition.SHARDED, trial, trial)
    append_trial(run_dir, record)
    return time.perf_counter() - started, len(record.turns)


def overhead(tasks: list[Task], rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        stores = {side: SQLiteStore(folder / f"{side}.db", durability=Durability.NORMAL)
                  for side in ("bare", "harness")}
        models = {side: ScriptedModel() for side in stores}
        totals = {side: 0.0 for side in stores}
        turns = {side: 0 for side in stores}
        ratios = []
        for n in range(rounds + 1):  # round 0 warms up, untimed
            spent = {side: 0.0 for side in stores}
            order = ["bare", "harness"] if n % 2 else ["harness", "bare"]
            for task in tasks:
                for side in order:
                    if side == "bare":
                        seconds, count = bare(stores[side], models[side], task)
                    else:
                        seconds, count = harness(stores[side], models[side], task, folder, n)
                    spent[side] += seconds
                    if n:
                        turns[side] += count
            if n:
                for side in stores:
                    totals[side] += spent[side]
                ratios.append(spent["harness"] / spent["bare"])
        for store in stores.values():
            store.close()
    per_turn = {side: totals[side] / turns[side] * 1000 for side in stores}
    return {"tasks": len(tasks), "rounds": rounds, "turns_per_side": turns["bare"],
            "bare_ms_per_turn": round(per_turn["bare"], 3),
            "harness_ms_per_turn": round(per_turn["harness"], 3),
            "ratio": round(totals["harness"] / totals["bare"], 3),
            "median_round_ratio": round(statistics.median(ratios), 3), "target": 1.15}


def code_grading(tasks: list[Task], repeats: int) -> dict[str, Any] | None:
    code = [t for t in tasks if t.kind == "code"]
    if not code:
        return None
    reply = "```python\ndef f(*args):\n    return None\n```"
    started = time.perf_counter()
    for _ in range(repeats):
        for task in code:
            graders.grade(task, reply)
    return {"grades": repeats * len(code),
            "ms_per_grade": round((time.perf_counter() - started) * 1000 /
                                  (repeats * len(code)), 1)}


def rescore(quick: bool) -> dict[str, Any] | None:
    paths = [SHARED / "sim_logs_math.jsonl", SHARED / "sim_logs_actions.jsonl"]
    if not all(p.is_file() for p in paths):
        return None
    started = time.perf_counter()
    logs, _ = read_logs(paths)
    if quick:
        logs = logs[::20]
    tasks = load_tasks(SAMPLE)[0] if SAMPLE.is_file() else []
    found = validate(logs, tasks)
    seconds = time.perf_counter() - started
    return {"conversations": len(logs), "seconds": round(seconds, 3),
            **{kind: {key: report[key] for key in (
                "evaluations", "evaluation_agreement", "grader_agreement", "run_agreement",
                "classification_agreement", "mean_drop_log", "models_dropping", "models")}
               | {"disagreements": report["disagreements"]}
               for kind, report in found["kinds"].items()}, "target": 0.95}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    source = SAMPLE if SAMPLE.is_file() else FIXTURE
    tasks = load_tasks(source)[0]
    gradable = [t for t in tasks if t.kind in ("math", "actions")]
    report = {"benchmark": "eval_overhead", "tasks_file": str(source),
              "overhead": overhead(gradable, 2 if args.quick else args.rounds),
              "code": code_grading(tasks, 1 if args.quick else 5),
              "rescore": rescore(args.quick)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    o = report["overhead"]
    print(f"harness overhead ({o['tasks']} tasks, {o['rounds']} rounds, {o['turns_per_side']} "
          f"turns a side): bare {o['bare_ms_per_turn']} ms/turn, harness "
          f"{o['harness_ms_per_turn']} ms/turn, ratio {o['ratio']} (median of rounds "
          f"{o['median_round_ratio']}; target ≤ {o['target']})")
    if report["code"]:
        print(f"code grading: {report['code']['ms_per_grade']} ms per sandboxed test run")
    r = report["rescore"]
    if r is None:
        print("re-scoring: the published logs are not there; skipped")
        return
    print(f"re-scoring {r['conversations']} logged conversations: {r['seconds']} s")
    for kind in ("math", "actions"):
        if kind in r:
            k = r[kind]
            print(f"  {kind}: answers {k['evaluation_agreement']}, grader alone "
                  f"{k['grader_agreement']}, runs {k['run_agreement']}, labels "
                  f"{k['classification_agreement']}; FULL→SHARDED drop {k['mean_drop_log']} "
                  f"({k['models_dropping']}/{k['models']} models)")


if __name__ == "__main__":
    main()
