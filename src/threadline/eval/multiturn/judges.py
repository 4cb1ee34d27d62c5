"""The judge: a model on any backend asked one yes/no question per rubric item.

Pluggable and recorded, as the user simulator is. ``none`` asks nothing (the programmatic
items are still graded). ``model`` puts each question to its own backend (greedy, a few
tokens) with ``PROMPT``; the run record keeps the model id and the prompt's hash, and every
answer is kept verbatim with the item it answers, so a re-score reads verdicts from the log
and asks nothing. The first "yes" or "no" the answer says is its verdict (a small model
often says "The answer is Yes"); an answer that says neither is kept as it came and counts
as no verdict, not as a pass or a fail. The question comes last in the prompt, so the
questions about one reply share their prefix in a backend's cache.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Protocol

from threadline.models.base import ModelBackend
from threadline.request import Message, Request, Segment, SegmentKind, Stability

PROMPT = """Read a user's message and an AI assistant's reply to it, then answer one \
yes/no question about the reply. Judge only what the question asks, strictly.

User's message: {message}

Assistant's reply: {reply}

Question: {question}
Answer Yes or No."""

_CLIP = 1500  # characters of the message and of the reply the judge sees


@dataclass(frozen=True)
class Verdict:
    answer: str            # what the judge said, verbatim
    passed: bool | None    # None: neither yes nor no

    def to_json(self) -> dict[str, Any]:
        return {"answer": self.answer, "passed": self.passed}


def read_answer(answer: str) -> bool | None:
    """Yes → True, No → False: the first of the two words the answer says ("The answer is
    Yes", "1) No"); anything else → None."""
    found = re.search(r"\b(yes|no)\b", answer, re.I)
    return None if found is None else found.group(1).casefold() == "yes"


class Judge(Protocol):
    name: str
    version: str

    def ask(self, message: str, reply: str, question: str) -> Verdict: ...

    def record(self) -> dict[str, Any]: ...


class NoJudge:
    name, version = "none", "1"

    def ask(self, message: str, reply: str, question: str) -> Verdict:
        raise AssertionError("the 'none' judge is never asked")

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


def _clip(text: str) -> str:
    return text if len(text) <= _CLIP else text[:_CLIP] + " […]"


class ModelJudge:
    name, version = "model", "1"

    def __init__(self, model: ModelBackend) -> None:
        self.model = model

    @property
    def prompt_hash(self) -> str:
        return "b2:" + hashlib.blake2b(PROMPT.encode("utf-8"), digest_size=16).hexdigest()

    def prompt(self, message: str, reply: str, question: str) -> str:
        return PROMPT.format(message=_clip(message.strip()), reply=_clip(reply.strip()),
                             question=question)

    def ask(self, message: str, reply: str, question: str) -> Verdict:
        body = self.prompt(message, reply, question)
        request = Request(tools=(), segments=(Segment(SegmentKind.CURRENT, Stability.TURN,
                                                      (Message("user", body),)),))
        answer = self.model.complete(request).text.strip()
        return Verdict(answer, read_answer(answer))

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "model": self.model.model_id,
                "prompt_hash": self.prompt_hash}


JUDGES = {NoJudge.name: NoJudge.version, ModelJudge.name: ModelJudge.version}
