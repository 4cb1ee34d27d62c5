"""Re-grading Lost-in-Conversation-shaped logs: agreement, disagreement classes, the drop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from threadline.cli import cli
from threadline.errors import InputError
from threadline.eval.multiturn.lic_logs import read_logs, validate

SYSTEM = "Solve the question."


def _math(conv: str, model: str, kind: str, replies: list[tuple[str, str, float | None]],
          score: float | None) -> dict[str, Any]:
    trace: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for text, extracted, graded in replies:
        trace += [{"role": "user", "content": "q"}, {"role": "assistant", "content": text}]
        if kind == "sharded":
            trace.append({"role": "log", "content": {"type": "system-verification",
                                                     "response": {"response_type":
                                                                  "answer_attempt"}}})
        if graded is not None:
            trace.append({"role": "log", "content": {"type": "answer-evaluation",
                                                     "exact_answer": extracted,
                                                     "score": graded}})
    return {"conv_id": conv, "conv_type": kind, "task": "math", "task_id": "sharded-GSM8K-7",
            "assistant_model": model, "is_correct": None, "score": score, "trace": trace}


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    rows = [
        _math("a", "m1", "full", [("So the answer is **12**.", "12", 1.0)], 1.0),
        _math("b", "m1", "full", [("That makes 12 apples.", "12", 1.0)], 1.0),
        # the log's extractor found nothing in a reply that states the right number
        _math("c", "m1", "sharded", [("Let me see... 5 so far?", "", None),
                                     ("In total there are **12** apples.", "", 0.0)], 0.0),
        _math("d", "m1", "sharded", [("The answer is 11.", "11", 0.0)], 0.0),
        {"conv_id": "e", "conv_type": "full", "task": "summary", "task_id": "s",
         "assistant_model": "m1", "trace": []},
    ]
    path = tmp_path / "sim_logs_math.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_agreement_and_every_disagreement_classed(logs: Path) -> None:
    found, skipped = read_logs([logs])
    assert len(found) == 4 and skipped == {"task kind summary": 1}
    report = validate(found)["kinds"]["math"]
    assert report["references"] == {"sharded-GSM8K-7": "recovered from the logs"}
    assert report["recovered_references_consistent"] is True
    assert report["evaluations"] == 4
    assert report["evaluation_agreement"] == 0.75
    assert report["disagreements"] == [{
        "class": "log wrong: its extractor returned nothing from a reply stating the right "
                 "number", "count": 1, "example": "c"}]
    assert report["run_agreement"] == 0.75
    # m1: FULL 2/2 correct, SHARDED 0/2 by the log: a drop of 1.0; ours: 1/2, a drop of 0.5
    (row,) = report["full_to_sharded"]
    assert row["log"]["drop"] == 1.0 and row["ours"]["drop"] == 0.5


def test_the_command_prints_json(logs: Path, tmp_path: Path) -> None:
    env = {"THREADLINE_HOME": str(tmp_path / "home")}
    done = CliRunner().invoke(cli, ["eval", "lic-logs", str(logs), "--json"], env=env)
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["kinds"]["math"]["evaluations"] == 4
    shown = CliRunner().invoke(cli, ["eval", "lic-logs", str(logs)], env=env)
    assert "agreement with the logged grades" in shown.stdout


def test_a_line_that_is_no_log_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"conv_id": "x"}\n')
    with pytest.raises(InputError, match="bad.jsonl:1 is not a Lost in Conversation log"):
        read_logs([bad])
