"""A run directory: what a run keeps, and reading it back.

    config.toml    the config as given
    run.json       the manifest: config digest, model, simulator, arms, judge, seeds,
                   isolation of the code sandbox, versions, times
    tasks.json     the tasks as run (shards, prompts, references), so a re-score needs
                   nothing outside the directory
    threadline.db  the store: every simulated conversation, with its exact model calls
    trials.jsonl   one line per trial: which conversation, and per turn which user message
                   and reply items, which call, and the grade given while running
    report.json    metrics, recomputed from the store by ``report`` and ``rescore``
    tables.txt, plots/*.png

The runs live under ``THREADLINE_HOME/eval/RUN_ID`` unless ``--out`` put one elsewhere.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadline.errors import InputError, NotFound
from threadline.eval.multiturn.grades import Grade
from threadline.eval.multiturn.tasks import Shard, Task
from threadline.items import format_time, utc_now
from threadline.settings import Durability
from threadline.stores.sqlite.store import SQLiteStore

MANIFEST, TASKS, TRIALS, REPORT, STORE, CONFIG = (
    "run.json", "tasks.json", "trials.jsonl", "report.json", "threadline.db", "config.toml")


@dataclass(frozen=True)
class TurnRecord:
    index: int                  # 1-based turn of the conversation
    kind: str                   # the user turn's kind (see conditions.UserTurn)
    shards: tuple[int, ...]
    user_seq: int
    reply_seq: int
    call_id: str
    grade: Grade                # as graded while running (it decided whether to go on)
    fallback: bool = False      # the simulator fell back to the verbatim shard

    def to_json(self) -> dict[str, Any]:  # by hand: dataclasses.asdict deep-copies, slowly
        return {"index": self.index, "kind": self.kind, "shards": list(self.shards),
                "user_seq": self.user_seq, "reply_seq": self.reply_seq,
                "call_id": self.call_id, "grade": self.grade.to_json(),
                "fallback": self.fallback}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TurnRecord:
        return cls(value["index"], value["kind"], tuple(value["shards"]), value["user_seq"],
                   value["reply_seq"], value["call_id"], Grade.from_json(value["grade"]),
                   value.get("fallback", False))


@dataclass
class TrialRecord:
    task_id: str
    task_kind: str
    condition: str
    arm: str
    trial: int
    seed: int
    conversation_id: str | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    error: str | None = None    # the model call or turn that failed; the trial scores 0
    elapsed_s: float = 0.0

    @property
    def correct(self) -> bool:
        return any(turn.grade.correct for turn in self.turns)

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "task_kind": self.task_kind,
                "condition": self.condition, "arm": self.arm, "trial": self.trial,
                "seed": self.seed, "conversation_id": self.conversation_id,
                "turns": [turn.to_json() for turn in self.turns], "error": self.error,
                "elapsed_s": self.elapsed_s, "correct": self.correct}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TrialRecord:
        return cls(value["task_id"], value["task_kind"], value["condition"], value["arm"],
                   value["trial"], value["seed"], value.get("conversation_id"),
                   [TurnRecord.from_json(t) for t in value.get("turns", [])],
                   value.get("error"), value.get("elapsed_s", 0.0))


def task_json(task: Task) -> dict[str, Any]:
    return {"id": task.id, "kind": task.kind, "system": task.system, "full": task.full,
            "shards": [{"shard_id": s.id, "shard": s.text} for s in task.shards],
            "reference": dict(task.reference)}


def task_from_json(value: dict[str, Any]) -> Task:
    return Task(value["id"], value["kind"],
                tuple(Shard(s["shard_id"], s["shard"]) for s in value["shards"]),
                value["system"], value["full"], value["reference"])


def write_json(path: Path, value: Any) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n", "utf-8")
    temporary.replace(path)  # a reader never sees half a file


@contextmanager
def recording(run_dir: Path, manifest: dict[str, Any]) -> Iterator[SQLiteStore]:
    """The run's store while its conversations run; the manifest then says how the run
    ended (finished, or interrupted by what it raised), when, and after how long."""
    store = SQLiteStore(run_dir / STORE, durability=Durability.NORMAL)
    started = time.perf_counter()
    try:
        yield store
        manifest["status"] = "finished"
    except BaseException:
        manifest["status"] = "interrupted"
        raise
    finally:
        store.close()
        manifest["finished_at"] = format_time(utc_now())
        manifest["wall_s"] = round(time.perf_counter() - started, 3)
        write_json(run_dir / MANIFEST, manifest)


def start_run(run_dir: Path, manifest: dict[str, Any], tasks: Sequence[Task],
              config_text: str) -> None:
    """Create the run directory; refuse one that already holds a run."""
    if (run_dir / MANIFEST).exists():
        raise InputError(f"{run_dir} already holds a run; nothing was run",
                         hint="give the run another id (run.id or --id), or another --out")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG).write_text(config_text, "utf-8")
    write_json(run_dir / TASKS, [task_json(task) for task in tasks])
    write_json(run_dir / MANIFEST, manifest)


def append_trial(run_dir: Path, trial: TrialRecord) -> None:
    with (run_dir / TRIALS).open("a", encoding="utf-8") as out:
        out.write(json.dumps(trial.to_json(), ensure_ascii=False) + "\n")


@dataclass(frozen=True)
class Run:
    path: Path
    manifest: dict[str, Any]
    tasks: dict[str, Task]
    trials: list[TrialRecord]


def read_run(run_dir: Path) -> Run:
    """A run directory read back, or an error saying what is missing or broken."""
    if not (run_dir / MANIFEST).is_file():
        raise NotFound(f"{run_dir} is not an evaluation run (it has no {MANIFEST})",
                       hint="list the runs with: threadline eval runs")
    try:
        manifest = json.loads((run_dir / MANIFEST).read_text("utf-8"))
        tasks = {t["id"]: task_from_json(t)
                 for t in json.loads((run_dir / TASKS).read_text("utf-8"))}
        trials = [TrialRecord.from_json(json.loads(line)) for line in _lines(run_dir / TRIALS)]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InputError(f"{run_dir} is damaged: {type(err).__name__}: {err}",
                         hint="a run interrupted before its first trial has no trials yet"
                         ) from err
    return Run(run_dir, manifest, tasks, trials)


def _lines(path: Path) -> Iterator[str]:
    if not path.exists():
        return
    with path.open(encoding="utf-8") as lines:
        yield from (line for line in lines if line.strip())


def resolve_run(root: Path, name: str) -> Path:
    """A run by its directory, or by its id under ``root``."""
    path = Path(name)
    if (path / MANIFEST).is_file():
        return path
    if (root / name / MANIFEST).is_file():
        return root / name
    raise NotFound(f"no evaluation run {name!r} (neither a run directory nor a run id under "
                   f"{root})", hint="list the runs with: threadline eval runs")


def list_runs(root: Path) -> list[dict[str, Any]]:
    """The runs under ``root``, newest first: id, when, status, what they ran."""
    found = []
    for manifest_path in sorted(root.glob(f"*/{MANIFEST}")) if root.is_dir() else []:
        try:
            manifest = json.loads(manifest_path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        found.append({"id": manifest.get("id"), "path": str(manifest_path.parent),
                      "started_at": manifest.get("started_at"),
                      "finished_at": manifest.get("finished_at"),
                      "status": manifest.get("status"), "model": manifest.get("model", {}).get(
                          "model"), "conditions": manifest.get("conditions"),
                      "arms": [a.get("name") for a in manifest.get("arms", [])],
                      "tasks": len(manifest.get("task_ids", [])), "k": manifest.get("k"),
                      "trials": sum(1 for _ in _lines(manifest_path.parent / TRIALS))})
    return sorted(found, key=lambda r: r["started_at"] or "", reverse=True)
