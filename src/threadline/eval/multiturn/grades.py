"""What grading says about one assistant turn: its response type, the answer it gives, and
whether that answer is correct. A leaf module: the extractors, the graders and the records
all speak it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ANSWER_ATTEMPT = "answer_attempt"
CLARIFICATION = "clarification"
DISCUSSION = "discussion"
RESPONSE_TYPES = (ANSWER_ATTEMPT, CLARIFICATION, DISCUSSION)


@dataclass(frozen=True)
class Grade:
    """``answer`` is what was extracted (None: none); ``correct`` is None for a turn that is
    no answer attempt (nothing was graded); ``detail`` says why a grade is what it is."""

    response_type: str
    answer: str | None = None
    correct: bool | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"type": self.response_type, "answer": self.answer, "correct": self.correct,
                "detail": self.detail}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Grade:
        return cls(value["type"], value.get("answer"), value.get("correct"),
                   value.get("detail", ""))
