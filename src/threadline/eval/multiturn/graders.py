"""Each task kind's grader, by name: the reply's response type, its answer and its grade.

Grading reads only the reply's text and the task: it makes no model call, so a recorded run
can be graded again at any time (``threadline eval rescore``) and come out the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from threadline.eval.multiturn import action_calls, code_tests, math_answers
from threadline.eval.multiturn.grades import Grade
from threadline.eval.multiturn.tasks import Task

GRADER_VERSION = "1"  # bumped whenever a rule changes what a reply is graded


def _math(text: str, reference: Mapping[str, Any]) -> Grade:
    return math_answers.grade(text, str(reference["answer"]))


def _code(text: str, reference: Mapping[str, Any]) -> Grade:
    return code_tests.grade(text, {k: str(v) for k, v in reference.items()})


def _actions(text: str, reference: Mapping[str, Any]) -> Grade:
    return action_calls.grade(text, reference)


GRADERS: dict[str, Callable[[str, Mapping[str, Any]], Grade]] = {
    "math": _math, "code": _code, "actions": _actions,
}


def grade(task: Task, text: str) -> Grade:
    """The grade of one assistant reply to ``task``."""
    return GRADERS[task.kind](text, task.reference)
