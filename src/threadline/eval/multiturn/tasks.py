"""Tasks as data: Lost in Conversation's sharded instructions, and what each kind is graded by.

A sharded instruction is a fully specified task (a GSM8K question, a HumanEval function, a
BFCL function call, ...) split into shards: the first states the goal, the others add one
piece of information each. Three kinds are graded here by program:

    math      GSM8K: the numeric answer after ``####`` in the reference solution
    code      HumanEval: the task's own tests (``check(candidate)``) run in a sandbox
    actions   BFCL: the reference calls, matched by the call's syntax tree

The others are loaded but marked unsupported, with the reason, so a run says what it left out
instead of grading it badly: ``database`` (Spider: the SQL must run against databases that are
not shipped), ``summary`` (graded by a judge model, which this harness does not have yet),
``data2text`` and ``translation`` (graded by BLEU-like overlap, not a binary grade).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadline.errors import InputError
from threadline.eval.files import read_records

GRADED = ("math", "code", "actions")
UNSUPPORTED = {
    "database": "Spider SQL: grading runs the query against the Spider databases, which are "
                "not shipped",
    "summary": "Summary of a Haystack: graded by a judge model, which this harness has none "
               "of yet",
    "data2text": "ToTTo: graded by BLEU against references, not a binary grade",
    "translation": "WMT: graded by BLEU against the reference, not a binary grade",
}


@dataclass(frozen=True)
class Shard:
    id: int
    text: str


@dataclass(frozen=True)
class Task:
    id: str
    kind: str
    shards: tuple[Shard, ...]
    system: str             # the system prompt every condition shares
    full: str               # the fully specified instruction, in one user turn (FULL)
    reference: Mapping[str, Any] = field(default_factory=dict)  # what the grader needs

    def concat(self) -> str:
        """Every shard in one turn (CONCAT): the goal, then the rest as a list."""
        first, *rest = self.shards
        return "\n".join([first.text, *(f"- {shard.text}" for shard in rest)])


@dataclass(frozen=True)
class Unsupported:
    id: str
    kind: str
    reason: str


MATH_SYSTEM = ("You are an expert problem solver. Work through the question step by step, "
               "then state the final answer as a single number.")
CODE_SYSTEM = ("You are an expert Python programmer. Answer with one top-level Python "
               "function that meets the whole specification, in a ```python block.")
ACTIONS_SYSTEM = (
    "You compose function calls. Given a request and the functions below, answer with the "
    "call or calls that fulfil it, written as [func_name(param=value, ...), ...] and nothing "
    "else. If a call needs a value the request has not given, say so.\n\nFunctions:\n{functions}")


def load_tasks(path: Path) -> tuple[list[Task], list[Unsupported]]:
    """The gradable tasks of a sharded-instructions file, and the others with the reason
    each is left out; InputError saying what is wrong with a malformed record."""
    tasks: list[Task] = []
    skipped: list[Unsupported] = []
    for n, record in enumerate(read_records(path, what="sharded instructions")):
        where = f"{path}: record {n}"
        if not isinstance(record, dict) or not isinstance(record.get("task_id"), str) \
                or not isinstance(record.get("task"), str):
            raise InputError(f"{where} is not a sharded instruction",
                             hint='each needs "task_id", "task" and "shards"')
        kind = record["task"]
        if kind not in GRADED:
            skipped.append(Unsupported(record["task_id"], kind, UNSUPPORTED.get(
                kind, f"no grader for task kind {kind!r}")))
            continue
        shards = _shards(where, record.get("shards"))
        try:
            made = _BUILDERS[kind](record, shards)
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise InputError(f"{where} ({record['task_id']}): a {kind} task without the "
                             f"fields its grader needs ({type(err).__name__}: {err})",
                             hint=f"see docs/eval.md for what a {kind} record holds") from err
        if isinstance(made, Unsupported):
            skipped.append(made)
        else:
            tasks.append(made)
    return tasks, skipped


def _shards(where: str, value: Any) -> tuple[Shard, ...]:
    if not isinstance(value, list) or len(value) < 2 or not all(
            isinstance(s, dict) and isinstance(s.get("shard"), str) and s["shard"].strip()
            and isinstance(s.get("shard_id"), int) for s in value):
        raise InputError(f"{where}: shards must be a list of at least two "
                         '{"shard_id": int, "shard": text} objects')
    return tuple(Shard(s["shard_id"], s["shard"]) for s in value)


def _math(record: Mapping[str, Any], shards: tuple[Shard, ...]) -> Task:
    answer = str(record["answer"])
    if "####" not in answer:
        raise ValueError('the "answer" has no "#### <number>" line')
    gold = answer.split("####")[-1].strip()
    return Task(record["task_id"], "math", shards, MATH_SYSTEM, str(record["question"]),
                {"answer": gold})


def _code(record: Mapping[str, Any], shards: tuple[Shard, ...]) -> Task | Unsupported:
    if record.get("source") != "humaneval" or not isinstance(record.get("test"), str):
        return Unsupported(record["task_id"], "code",
                           f"code from {record.get('source')!r}: only HumanEval's "
                           "check(candidate) tests are run here")
    name = record["metadata"]["func_name"]
    full = ("Complete this Python function so that it does what its docstring says:\n"
            f"```python\n{record['prompt'].strip()}\n```")
    return Task(record["task_id"], "code", shards, CODE_SYSTEM, full,
                {"prompt": record["prompt"], "test": record["test"], "entry_point": name})


def _actions(record: Mapping[str, Any], shards: tuple[Shard, ...]) -> Task:
    functions = record["function"]
    if not isinstance(functions, list) or not functions:
        raise ValueError('"function" must list the callable functions')
    question = record["fully_specified_question"][0][0]["content"]
    reference = record["reference_answer"]
    if not isinstance(reference, list):
        raise ValueError('"reference_answer" must be a list of calls')
    system = ACTIONS_SYSTEM.format(functions=json.dumps(functions, ensure_ascii=False))
    return Task(record["task_id"], "actions", shards, system, str(question),
                {"functions": functions, "calls": reference,
                 "category": str(record.get("test_category", "parallel"))})


_BUILDERS = {"math": _math, "code": _code, "actions": _actions}


def select(tasks: Sequence[Task], *, kinds: Sequence[str] = (), ids: Sequence[str] = (),
           limit: int | None = None) -> list[Task]:
    """The tasks a run's filter keeps, in file order: of ``kinds`` (all when empty), named in
    ``ids`` (all when empty), the first ``limit`` of each kind."""
    kept: list[Task] = []
    per_kind: dict[str, int] = {}
    for task in tasks:
        if (kinds and task.kind not in kinds) or (ids and task.id not in ids):
            continue
        if limit is not None and per_kind.get(task.kind, 0) >= limit:
            continue
        per_kind[task.kind] = per_kind.get(task.kind, 0) + 1
        kept.append(task)
    return kept
