"""Validating the graders against Lost in Conversation's published simulation logs.

Each log line is one simulated conversation (FULL, CONCAT or SHARDED) of one model on one
task, with the simulator's own events: ``system-verification`` (its model's label for each
reply) and ``answer-evaluation`` (the answer its model extracted, ``exact_answer``, and the
grade it got). This re-grades every logged evaluation with threadline's rules, from the
reply's full text, and reports how often the two agree, at three levels:

    evaluations  each logged answer evaluation: our extraction and grade of that reply
    grader       the same, on the log's own extracted answer (the grader alone)
    runs         each conversation's outcome, our rules replayed turn by turn (a FULL or
                 CONCAT reply is graded as it is; a SHARDED one when our classifier calls it
                 an answer attempt, stopping at the first correct one)

plus how often our classifier and the log's agree on whether a reply is an answer attempt.

The references: a task found in ``tasks`` (a sharded-instructions file) is graded against
its own reference. The logs' tasks are mostly not in the 5-per-task sample that is shipped,
so the others are graded against what the log itself accepted, leave-one-out: a math
task's number is the value of the answers the log graded correct in the *other*
conversations (they agree: the report says so); an actions reply is correct when it matches,
by the BFCL rules, an answer the log graded correct in another conversation. So a variant
that only one conversation found (an optional parameter left out, say) is not accepted;
that class of disagreement is named in the report.

Every disagreement is put in a class, with its count and an example conversation id.
"""

from __future__ import annotations

import ast
import contextlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from threadline.errors import InputError
from threadline.eval.multiturn import action_calls, math_answers
from threadline.eval.multiturn.grades import ANSWER_ATTEMPT
from threadline.eval.multiturn.tasks import Task

KINDS = ("math", "actions")
_ALIASES = {"llama3.1-8b-instruct": "llama3.1-8b-inst"}  # one model logged under two names


@dataclass
class Log:
    conv_id: str
    kind: str
    task_id: str
    conv_type: str
    model: str
    outcome: bool | None     # the log's own grade of the conversation (None: not graded)
    trace: list[dict[str, Any]]
    functions: list[dict[str, Any]] = field(default_factory=list)  # actions: from the prompt


def _logged(value: Mapping[str, Any]) -> bool | None:
    score = value.get("score")
    if score is not None:
        return bool(score == 1)
    correct = value.get("is_correct")
    return None if correct is None else bool(correct)


def read_logs(paths: Sequence[Path]) -> tuple[list[Log], Counter[str]]:
    logs: list[Log] = []
    skipped: Counter[str] = Counter()
    for path in paths:
        try:
            lines = path.read_text("utf-8").splitlines()
        except OSError as err:
            raise InputError(f"cannot read {path}: {err.strerror or err}") from err
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                kind = record["task"]
                if kind not in KINDS:
                    skipped[f"task kind {kind}"] += 1
                    continue
                model = str(record["assistant_model"])
                log = Log(record["conv_id"], kind, _task_key(record["task_id"]),
                          record["conv_type"], _ALIASES.get(model, model), _logged(record),
                          list(record["trace"]))
                if kind == "actions":
                    system = log.trace[0]["content"]
                    log.functions = ast.literal_eval(system[system.rindex("\n\n[") + 2:])
            except (ValueError, KeyError, TypeError, SyntaxError) as err:
                raise InputError(f"{path}:{n} is not a Lost in Conversation log line "
                                 f"({type(err).__name__}: {err})",
                                 hint="each line needs conv_id, task, task_id, conv_type, "
                                      "assistant_model and trace") from err
            logs.append(log)
    if not logs:
        raise InputError("the logs hold no math or actions conversation")
    return logs, skipped


def _task_key(task_id: str) -> str:
    return task_id.replace("/", "-")  # the logs write sharded-GSM8K-288, the tasks GSM8K/288


def _evaluations(log: Log) -> Iterable[tuple[str, dict[str, Any]]]:
    """(the reply's text, the evaluation) for each logged answer evaluation."""
    reply = ""
    for entry in log.trace:
        if entry["role"] == "assistant":
            reply = str(entry["content"] or "")
        elif entry["role"] == "log" and entry["content"].get("type") == "answer-evaluation":
            yield reply, entry["content"]


def _verifications(log: Log) -> Iterable[tuple[str, str]]:
    reply = ""
    for entry in log.trace:
        if entry["role"] == "assistant":
            reply = str(entry["content"] or "")
        elif entry["role"] == "log" and entry["content"].get("type") == "system-verification":
            yield reply, str(entry["content"].get("response", {}).get("response_type"))


class References:
    """What each conversation is graded against (see the module's docstring)."""

    def __init__(self, logs: Sequence[Log], tasks: Sequence[Task]) -> None:
        self.given = {_task_key(t.id): t for t in tasks if t.kind in KINDS}
        self.numbers: dict[str, list[tuple[str, Fraction]]] = defaultdict(list)
        self.calls: dict[str, list[tuple[str, list[action_calls.Call]]]] = defaultdict(list)
        for log in logs:
            for _, evaluation in _evaluations(log):
                if not _logged(evaluation):
                    continue
                answer = str(evaluation.get("exact_answer") or "")
                if log.kind == "math" and (number := math_answers.value(answer)) is not None:
                    self.numbers[log.task_id].append((log.conv_id, number))
                elif log.kind == "actions":
                    with contextlib.suppress(action_calls.NotCalls):  # ungradable: not used
                        self.calls[log.task_id].append(
                            (log.conv_id, action_calls.parse_calls(answer)))

    def source(self, task_id: str) -> str:
        return "tasks file" if task_id in self.given else "recovered from the logs"

    def number(self, log: Log) -> Fraction | None:
        if log.task_id in self.given:
            return math_answers.value(str(self.given[log.task_id].reference["answer"]))
        found = Counter(v for conv, v in self.numbers[log.task_id] if conv != log.conv_id)
        return found.most_common(1)[0][0] if found else None

    def consistent(self, task_id: str) -> bool:
        return len({v for _, v in self.numbers[task_id]}) <= 1

    def math_correct(self, log: Log, answer: str | None) -> bool:
        gold = self.number(log)
        return gold is not None and answer is not None and math_answers.value(answer) == gold

    def actions_check(self, log: Log, text: str) -> str | None:
        """Why ``text`` is not a correct answer (None: it is)."""
        try:
            calls = action_calls.parse_calls(text)
        except action_calls.NotCalls as err:
            return f"unparsable: {err}"
        if log.task_id in self.given:
            return action_calls.grade_calls(calls, self.given[log.task_id].reference).detail \
                or None
        others = [c for conv, c in self.calls[log.task_id] if conv != log.conv_id]
        if not others:
            return "no other conversation's accepted answer to compare with"
        reasons = [action_calls.check_calls(calls, [{n: {k: [v] for k, v in a.items()}}
                                                    for n, a in accepted],
                                            log.functions, "parallel") for accepted in others]
        return None if None in reasons else f"matches no accepted answer: {reasons[0]}"


def _ours(log: Log, refs: References, text: str) -> tuple[bool, str | None]:
    """Our grade of one reply, and the answer we extracted."""
    if log.kind == "math":
        answer = math_answers.extract(text)
        return refs.math_correct(log, answer), answer
    return refs.actions_check(log, text) is None, action_calls.extract(text)


def _classify(kind: str, text: str) -> str:
    return (math_answers.classify if kind == "math" else action_calls.classify)(text)


def _disagreement(log: Log, refs: References, text: str, evaluation: Mapping[str, Any],
                  ours: bool, answer: str | None) -> str:
    theirs = str(evaluation.get("exact_answer") or "")
    logged_error = str(evaluation.get("evaluation_return", {}).get("error") or "")
    if log.kind == "math":
        if not ours:
            return "ours wrong: we found no number" if answer is None else \
                "ours wrong: we took another number from the reply than the log's extractor"
        if not theirs.strip():
            return "log wrong: its extractor returned nothing from a reply stating the " \
                   "right number"
        if refs.math_correct(log, theirs):
            return "log wrong: its string match refused an extracted answer equal to the " \
                   "reference in value"
        return "log wrong: its extractor took another number from the reply"
    if ours:
        return "log wrong: it could not parse calls written among prose" if "parse" in \
            logged_error.lower() else "log wrong: its checker refused calls we accept"
    reason = refs.actions_check(log, text) or ""
    if reason.startswith("unparsable"):
        return "ours wrong: we could not parse the calls the log accepted"
    return "ours wrong: the accepted variant appears in no other conversation " \
           "(leave-one-out reference)"


def _run_disagreement(log: Log, ours: bool, differed: bool) -> str:
    if differed:
        return "one of its answers is graded differently (the classes above)"
    if log.conv_type != "sharded":
        return "the log's conversation-level grade disagrees with its own answer evaluation"
    if ours:
        return "we graded a reply the log's classifier did not call an answer attempt, and " \
               "it was correct"
    return "the log graded a reply our classifier did not call an answer attempt, or its " \
           "conversation-level grade disagrees with its own evaluations"


def _classes(found: Mapping[str, list[str]]) -> list[dict[str, Any]]:
    return [{"class": name, "count": len(ids), "example": ids[0]}
            for name, ids in sorted(found.items(), key=lambda kv: -len(kv[1]))]


def _replay(log: Log, refs: References) -> bool:
    """The conversation's outcome under our rules, turn by turn."""
    replies = [str(e["content"] or "") for e in log.trace if e["role"] == "assistant"]
    for text in replies:
        if log.conv_type == "sharded" and _classify(log.kind, text) != ANSWER_ATTEMPT:
            continue
        if _ours(log, refs, text)[0]:
            return True
    return False


def validate(logs: Sequence[Log], tasks: Sequence[Task] = (),
             progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    refs = References(logs, tasks)
    report: dict[str, Any] = {"conversations": len(logs), "kinds": {}}
    for kind in KINDS:
        mine = [log for log in logs if log.kind == kind]
        if not mine:
            continue
        tally: Counter[str] = Counter()
        classes: dict[str, list[str]] = defaultdict(list)
        run_classes: dict[str, list[str]] = defaultdict(list)
        outcomes: dict[tuple[str, str], list[tuple[bool, bool]]] = defaultdict(list)
        for log in mine:
            differed = False
            for text, evaluation in _evaluations(log):
                logged = _logged(evaluation)
                if logged is None:
                    tally["evaluations ungraded in the log"] += 1
                    continue
                ours, answer = _ours(log, refs, text)
                theirs = str(evaluation.get("exact_answer") or "")
                grader = refs.math_correct(log, theirs) if kind == "math" else \
                    refs.actions_check(log, theirs) is None
                tally["evaluations"] += 1
                tally["evaluations agreeing"] += ours == logged
                tally["grader agreeing"] += grader == logged
                if ours != logged:
                    differed = True
                    classes[_disagreement(log, refs, text, evaluation, ours, answer)].append(
                        log.conv_id)
            for text, label in _verifications(log):
                tally["classified"] += 1
                tally["classified agreeing"] += (_classify(kind, text) == ANSWER_ATTEMPT) == (
                    label == ANSWER_ATTEMPT)
            ours_outcome = _replay(log, refs)
            if log.outcome is None:
                tally["runs ungraded in the log"] += 1
            else:
                tally["runs"] += 1
                tally["runs agreeing"] += ours_outcome == log.outcome
                if ours_outcome != log.outcome:
                    run_classes[_run_disagreement(log, ours_outcome, differed)].append(
                        log.conv_id)
                outcomes[(log.model, log.conv_type)].append((log.outcome, ours_outcome))
            if progress is not None:
                progress(1)
        report["kinds"][kind] = _kind_report(kind, mine, refs, tally, classes, outcomes)
        report["kinds"][kind]["run_disagreements"] = _classes(run_classes)
    return report


def _rate(tally: Counter[str], key: str, of: str) -> float | None:
    return round(tally[key] / tally[of], 4) if tally[of] else None


def _kind_report(kind: str, logs: Sequence[Log], refs: References, tally: Counter[str],
                 classes: Mapping[str, list[str]],
                 outcomes: Mapping[tuple[str, str], list[tuple[bool, bool]]]) -> dict[str, Any]:
    tasks = sorted({log.task_id for log in logs})
    drops = []
    for model in sorted({m for m, _ in outcomes}):
        row: dict[str, Any] = {"model": model}
        for who, index in (("log", 0), ("ours", 1)):
            full = [o[index] for o in outcomes.get((model, "full"), [])]
            sharded = [o[index] for o in outcomes.get((model, "sharded"), [])]
            if full and sharded:
                f, s = sum(full) / len(full), sum(sharded) / len(sharded)
                row[who] = {"full": round(f, 4), "sharded": round(s, 4),
                            "drop": round((f - s) / f, 4) if f else None}
        drops.append(row)
    log_drops = [r["log"]["drop"] for r in drops if r.get("log", {}).get("drop") is not None]
    return {
        "conversations": len(logs),
        "references": {t: refs.source(t) for t in tasks},
        "recovered_references_consistent": all(refs.consistent(t) for t in tasks)
        if kind == "math" else None,
        "evaluations": tally["evaluations"],
        "evaluation_agreement": _rate(tally, "evaluations agreeing", "evaluations"),
        "grader_agreement": _rate(tally, "grader agreeing", "evaluations"),
        "classification_agreement": _rate(tally, "classified agreeing", "classified"),
        "runs": tally["runs"], "run_agreement": _rate(tally, "runs agreeing", "runs"),
        "ungraded": {"evaluations": tally["evaluations ungraded in the log"],
                     "runs": tally["runs ungraded in the log"]},
        "disagreements": _classes(classes),
        "full_to_sharded": drops,
        "mean_drop_log": round(sum(log_drops) / len(log_drops), 4) if log_drops else None,
        "models_dropping": sum(1 for d in log_drops if d > 0),
        "models": len(log_drops),
    }
