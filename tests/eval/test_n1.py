"""N-1 replay's parts: reading and cutting transcripts, the judge and what it records, the
paired statistics on a fixed example, and the errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from threadline.errors import InputError
from threadline.eval.multiturn.judges import PROMPT, ModelJudge, read_answer
from threadline.eval.multiturn.metrics import (
    bootstrap,
    paired_rate_difference,
    pooled_rate,
    sign_test,
)
from threadline.eval.multiturn.n1 import reminder_text, with_rubrics
from threadline.eval.multiturn.n1_config import Setting
from threadline.eval.multiturn.n1_transcripts import choose, read_transcripts
from threadline.models.scripted import ScriptedModel
from threadline.request import Request

FIXTURE = Path(__file__).parent / "data" / "n1_transcripts.jsonl"


def test_transcripts_are_cut_before_their_last_user_message() -> None:
    read = read_transcripts(FIXTURE, "sharegpt")
    by_id = {t.id: t for t in read.transcripts}
    french = by_id["french_0"]
    assert french.message == "What is the capital of Italy?"
    assert [role for role, _ in french.history] == ["user", "assistant"]
    assert french.original is not None and french.original.startswith("La capitale")
    assert by_id["bullets_0"].system == "You are a helpful assistant."
    assert by_id["late_0"].original is None  # it ends on the user's message
    assert {t.split for t in read.transcripts} <= {"dev", "test"}


def test_choosing_by_rubric_keeps_rules_said_before_the_last_turn() -> None:
    usable, left = choose(read_transcripts(FIXTURE, "sharegpt").transcripts, split="all",
                          ids=(), min_turns=2, max_chars=10_000)
    assert not left
    chosen, unruled = with_rubrics(usable, require="earlier", max_items=8, limit=None)
    assert [c.transcript.id for c in chosen] == ["french_0", "bullets_0"]
    assert unruled == 2  # plain_0 has no rule; late_0 says its rule in the last turn only
    any_rule, _ = with_rubrics(usable, require="any", max_items=8, limit=None)
    assert "late_0" in [c.transcript.id for c in any_rule]
    bullets = chosen[1]
    assert sorted(i.kind for i in bullets.rubric) == ["bullets", "forbidden"]
    note = reminder_text(Setting("b", reminder="constraints"), bullets.transcript)
    assert "Use bullet points in all your answers." in note
    assert reminder_text(Setting("a"), bullets.transcript) == ""


def test_wildchat_records_are_read_as_sharegpt(tmp_path: Path) -> None:
    path = tmp_path / "wild.jsonl"
    record = {"conversation_hash": "abc", "conversation": [
        {"role": "user", "content": "Always answer in German."},
        {"role": "assistant", "content": "Gut."},
        {"role": "user", "content": "Wie spät ist es"}]}
    path.write_text(json.dumps(record) + "\nnot json\n")
    read = read_transcripts(path, "wildchat")
    assert [(t.id, t.message) for t in read.transcripts] == [("abc", "Wie spät ist es")]
    assert read.skipped["unreadable"] == 1


def test_bad_transcript_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the transcripts"):
        read_transcripts(tmp_path / "missing.jsonl", "sharegpt")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "x", "conversations": "not a list"}\n{"nope": 1}\n')
    with pytest.raises(InputError, match="holds no usable sharegpt transcript"):
        read_transcripts(broken, "sharegpt")
    with pytest.raises(InputError, match="unknown transcript format"):
        read_transcripts(FIXTURE, "csv")


def test_the_judge_asks_one_question_and_records_its_prompt_and_model() -> None:
    seen: list[Request] = []

    def answer(request: Request) -> str:
        seen.append(request)
        return "Yes, it is." if "French" in request.messages[-1].content else "no"
    judge = ModelJudge(ScriptedModel(default=answer))
    verdict = judge.ask("What is the capital?", "Rome.", "Is the reply written in French?")
    assert verdict.passed is True and verdict.answer == "Yes, it is."
    assert judge.ask("q", "r", "Is it JSON?").passed is False
    body = seen[0].messages[-1].content
    assert body == judge.prompt("What is the capital?", "Rome.",
                                "Is the reply written in French?")
    assert body.endswith("Question: Is the reply written in French?\nAnswer Yes or No.")
    assert "Assistant's reply: Rome." in body
    record = judge.record()
    assert record["model"] == "scripted" and record["name"] == "model"
    assert record["prompt_hash"].startswith("b2:") and len(record["prompt_hash"]) == 35
    assert PROMPT.count("{") == 3  # message, reply, question


@pytest.mark.parametrize(("answer", "verdict"), [
    ("Yes", True), ("no.", False), ("**No**", False), ("YES — it does", True),
    ("The answer is Yes", True), ("1) No", False), ("Maybe", None), ("", None),
    ("Not sure", None), ("Nobody knows", None)])
def test_reading_the_judges_answer(answer: str, verdict: bool | None) -> None:
    assert read_answer(answer) is verdict


def test_paired_statistics_on_a_fixed_example() -> None:
    # five transcripts: (A passed, A graded, B passed, B graded)
    rows = np.array([[1, 2, 2, 2], [0, 1, 1, 1], [2, 3, 3, 3], [1, 1, 1, 1], [1, 2, 0, 2]],
                    dtype=np.float64)
    assert pooled_rate(rows[None, :, :2])[0] == pytest.approx(5 / 9)
    assert pooled_rate(rows[None, :, 2:])[0] == pytest.approx(7 / 9)
    assert paired_rate_difference(rows[None])[0] == pytest.approx(2 / 9)
    found = bootstrap(rows, paired_rate_difference, seed=0, resamples=2000, confidence=0.95,
                      name="x")
    assert found is not None and found.value == pytest.approx(2 / 9)
    assert found.low < found.value < found.high
    again = bootstrap(rows, paired_rate_difference, seed=0, resamples=2000, confidence=0.95,
                      name="x")
    assert again == found  # seeded: the same interval every time
    # three transcripts better under B, one under A, one tie: p = 2 * (1 + 4) / 16
    assert sign_test(3, 1) == pytest.approx(0.625)
    assert sign_test(10, 0) == pytest.approx(2 / 1024)
    assert sign_test(0, 0) == 1.0
