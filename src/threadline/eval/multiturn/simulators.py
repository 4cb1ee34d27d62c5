"""The simulated user: what it says to reveal the next shard. Pluggable and recorded.

The condition decides which shard comes next and how the turn is framed (see
``conditions.py``); the simulator only says it:

- ``shard-revealer`` (the default): the shard's text, verbatim. Deterministic: a run with it
  is reproducible from its config and seeds alone.
- ``model``: a model on any backend rephrases the shard as a user would type it, given the
  conversation so far. Its model id and the hash of its prompt template go into the run
  record; what it said is in the log as the user's message, so a re-score needs no call.
  An empty or over-long reply falls back to the verbatim shard, and the turn says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from threadline.eval.multiturn.tasks import Shard, Task
from threadline.models.base import ModelBackend
from threadline.request import Message, Request, Segment, SegmentKind, Stability

Transcript = Sequence[tuple[str, str]]  # (role, text), oldest first


@dataclass(frozen=True)
class Said:
    text: str
    fallback: bool = False  # the simulator's own words were unusable: the shard, verbatim


class UserSimulator(Protocol):
    name: str
    version: str

    def say(self, task: Task, shard: Shard, transcript: Transcript) -> Said: ...

    def record(self) -> dict[str, Any]: ...


class ShardRevealer:
    name, version = "shard-revealer", "1"

    def say(self, task: Task, shard: Shard, transcript: Transcript) -> Said:
        return Said(shard.text)

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


PROMPT = """You are playing a user who is chatting with an AI assistant about a task. You reveal \
the task one piece at a time, in your own casual words, without adding anything new.

The conversation so far:
{conversation}

The piece of information to reveal now:
{shard}

Write only your next message to the assistant: one or two short sentences that convey exactly \
that piece of information."""


class ModelSimulator:
    """A user simulated by ``model`` (its own backend; its calls are not the conversation's)."""

    name, version = "model", "1"
    max_chars = 1000

    def __init__(self, model: ModelBackend) -> None:
        self.model = model

    @property
    def prompt_hash(self) -> str:
        return "b2:" + hashlib.blake2b(PROMPT.encode("utf-8"), digest_size=16).hexdigest()

    def say(self, task: Task, shard: Shard, transcript: Transcript) -> Said:
        conversation = "\n".join(f"{role}: {' '.join(text.split())[:600]}"
                                 for role, text in transcript) or "(nothing yet)"
        body = PROMPT.format(conversation=conversation, shard=shard.text)
        request = Request(tools=(), segments=(Segment(SegmentKind.CURRENT, Stability.TURN,
                                                      (Message("user", body),)),))
        text = self.model.complete(request).text.strip().strip('"').strip()
        if not text or len(text) > self.max_chars:
            return Said(shard.text, fallback=True)
        return Said(text)

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "model": self.model.model_id,
                "prompt_hash": self.prompt_hash}
