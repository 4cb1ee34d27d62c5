"""The graders: math's number as GSM8K scores it, actions' calls by their syntax tree, code by
its tests in a sandboxed process."""

from __future__ import annotations

from pathlib import Path

import pytest

from threadline.errors import InputError
from threadline.eval.multiturn import action_calls, code_tests, graders, math_answers
from threadline.eval.multiturn.grades import ANSWER_ATTEMPT, CLARIFICATION, DISCUSSION
from threadline.eval.multiturn.tasks import Task, load_tasks

DATA = Path(__file__).parent / "data" / "sharded_tasks.json"


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    loaded, _ = load_tasks(DATA)
    return {task.kind: task for task in loaded}


@pytest.mark.parametrize(("reply", "answer"), [
    ("So the total is \\boxed{56}.", "56"),
    ("12 * 5 = 60\n#### 56", "56"),
    ("The final answer is: **$1,250**", "1,250"),
    ("Step 1: 12 x 5 = 60 loaves.\n\nThe baker sells **56 loaves** in all.", "56"),
    ("60 - 4 = 56\n\nTherefore, the baker sold 56 loaves over the 5 days.", "56"),
    ("Mr. Smith now has $17000 in capital.", "$17000"),
    ("Total = 40 x 21 = 840.\n\nIf you need anything else, let me know!", "840"),
    ("I need more details before I can work this out.", None),
    # a conclusion leads with its number, past the question's numbers after it
    ("6000 / 2000 = 3 trucks\n\nTherefore, 3 trucks will be needed to transport 80 "
     "flagstones in one trip.", "3"),
    ("So, your age is 13, your brother's age is 16 and your mom's age is 47.", "13"),
    # ... but not a number a preposition or an infinitive leads to
    ("Therefore, to deliver 80 flagstones you would need 3 trucks.", "3"),
    ("So, in 5 years she will have 300 stamps.", "300"),
    # a check of the answer restates the question's total: it is not the answer
    ("6x = 78, so x = 13.\n\nYou are **13 years old**.\n\nTo verify:\n- Sum of ages: "
     "13 + 16 + 11 + 47 = 87 ✓", "13"),
    ("x = 13\n\nYou are 13.\n\nThe total, 13 + 16 + 11 + 47 = 87, which matches the "
     "given sum.", "13"),
])
def test_math_extraction(reply: str, answer: str | None) -> None:
    assert math_answers.extract(reply) == answer or (
        answer is None and math_answers.classify(reply) != ANSWER_ATTEMPT)


def test_math_grade_is_numeric_after_gsm8k_normalisation() -> None:
    assert math_answers.grade_answer("$56.00", "56").correct
    assert math_answers.grade_answer("1,198", "1198").correct
    assert math_answers.grade_answer("7/2", "3.5").correct
    wrong = math_answers.grade_answer("57", "56")
    assert wrong.correct is False and "57 is not 56" in wrong.detail
    assert math_answers.grade_answer(None, "56").correct is False


def test_math_turn_types() -> None:
    assert math_answers.classify("The answer is 56.") == ANSWER_ATTEMPT
    assert math_answers.classify("How many days did the baker work?") == CLARIFICATION
    assert math_answers.classify("Could you please provide the number of days? Then I can "
                                 "help.") == CLARIFICATION
    assert math_answers.classify("Let's think about bread in general.") == DISCUSSION
    # a closing offer asks the user nothing: the number stands
    assert math_answers.classify("So the baker sold 56 loaves.\n\nAnything else I can help "
                                 "with?") == ANSWER_ATTEMPT


def test_math_through_the_task(tasks: dict[str, Task]) -> None:
    task = tasks["math"]
    assert graders.grade(task, "12 × 5 = 60, minus 4 is 56.\n\n**56**").correct
    assert graders.grade(task, "That makes **60** loaves.").correct is False
    assert graders.grade(task, "How many days?").correct is None


def test_actions_parallel_calls_match_in_any_order(tasks: dict[str, Task]) -> None:
    task = tasks["actions"]
    reply = ("```python\n[weather.get(city='bergen', days=3), "
             "weather.get(city='Oslo', days=3)]\n```")
    grade = graders.grade(task, reply)
    assert grade.response_type == ANSWER_ATTEMPT and grade.correct, grade.detail


@pytest.mark.parametrize(("reply", "why"), [
    ("[weather.get(city='Oslo', days=3)]", "expected 2 calls, got 1"),
    ("[weather.get(city='Oslo', days=3), weather.get(city='Bergen', days=4)]", "days=4"),
    ("[weather.get(city='Oslo', days='3'), weather.get(city='Bergen', days=3)]",
     "should be integer"),
    ("[weather.get(city='Oslo', days=3, unit='C'), weather.get(city='Bergen', days=3)]",
     "unexpected parameter 'unit'"),
    ("[weather.get(days=3), weather.get(city='Bergen', days=3)]", "required parameter"),
    ("[forecast(city='Oslo'), weather.get(city='Bergen', days=3)]", "expected weather.get"),
])
def test_actions_mismatches_say_why(tasks: dict[str, Task], reply: str, why: str) -> None:
    grade = graders.grade(tasks["actions"], reply)
    assert grade.correct is False and why in grade.detail


def test_actions_optional_parameter_may_be_left_out() -> None:
    reference = {"calls": [{"f": {"a": [1], "b": ["x", ""]}}],
                 "functions": [{"name": "f", "parameters": {"properties": {
                     "a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]}}],
                 "category": "simple"}
    assert action_calls.grade("[f(a=1)]", reference).correct
    assert action_calls.grade("f(a=1, b='X')", reference).correct  # a bare call, any case
    assert not action_calls.grade("[f(a=1, b='y')]", reference).correct


def test_actions_prose_is_no_answer_and_calls_are_never_evaluated() -> None:
    assert action_calls.classify("Which city do you mean?") == CLARIFICATION
    assert action_calls.extract("I will call the weather function.") is None
    with pytest.raises(action_calls.NotCalls):
        action_calls.parse_calls("[__import__('os').system('echo hi')]")
    calls = action_calls.parse_calls("Here you go: [f(x=[1, -2], y={'k': None}, z=g(1))]")
    assert calls == [("f", {"x": [1, -2], "y": {"k": None}, "z": "g(1)"})]


def test_code_passes_its_tests(tasks: dict[str, Task]) -> None:
    reply = ("Sure:\n```python\ndef keep_even(values):\n"
             "    return [v for v in values if v % 2 == 0]\n```")
    grade = graders.grade(tasks["code"], reply)
    assert grade.response_type == ANSWER_ATTEMPT and grade.correct, grade.detail


def test_code_failing_tests_fail_with_the_reason(tasks: dict[str, Task]) -> None:
    grade = graders.grade(tasks["code"], "```python\ndef evens(xs):\n    return xs\n```")
    assert grade.correct is False and "AssertionError" in grade.detail


def test_code_runs_with_a_time_limit() -> None:
    outcome = code_tests.run_tests("while True:\n    pass\n", time_limit_s=1.0)
    assert not outcome.passed and "timed out" in outcome.detail


def test_code_has_no_network_and_a_scratch_directory() -> None:
    assert code_tests.isolation() in ("netns", "socket-guard")
    source = ("import os, socket\nassert os.listdir('.') == ['program.py'], os.listdir('.')\n"
              "socket.create_connection(('127.0.0.1', 9), timeout=1)\n")
    outcome = code_tests.run_tests(source)
    assert not outcome.passed
    assert "OSError" in outcome.detail or "Error" in outcome.detail


def test_code_prose_is_no_attempt() -> None:
    assert code_tests.extract("I would loop over the list and keep the evens.") is None
    assert code_tests.classify("Should it keep the order?") == CLARIFICATION


def test_unsupported_kinds_are_named_with_a_reason() -> None:
    tasks, skipped = load_tasks(DATA)
    assert sorted(t.kind for t in tasks) == ["actions", "code", "math"]
    assert [(s.kind, "Spider" in s.reason) for s in skipped] == [("database", True)]


def test_a_malformed_task_file_says_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"task_id": "x", "task": "math", "shards": [{"shard_id": 1, "shard": "a"},'
                   ' {"shard_id": 2, "shard": "b"}], "question": "q", "answer": "no number"}]')
    with pytest.raises(InputError, match="####"):
        load_tasks(bad)
    bad.write_text('[{"task_id": "x", "task": "math", "shards": []}]')
    with pytest.raises(InputError, match="shards must be a list"):
        load_tasks(bad)
