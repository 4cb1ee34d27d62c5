"""A conversation as the monitor reads it: its turns so far, the new message, the system
prompt's declared scope, and the state the last decision left.

Built from the branch's items (the log, not the model's view: a compaction never hides a
turn from the monitor), so a decision is a function of what was recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from threadline.items import Item, ItemKind
from threadline.stores.base import Store
from threadline.turn import monitoring


@dataclass(frozen=True)
class Exchange:
    """One earlier turn: what the user said and the reply it got (None: unanswered)."""

    user: str
    reply: str | None = None


@dataclass(frozen=True)
class Trajectory:
    message: str                        # the new user message, being judged
    turns: tuple[Exchange, ...] = ()    # every earlier turn on the branch, oldest first
    system: str | None = None           # the system prompt: the conversation's declared scope
    previous: Mapping[str, Any] | None = None  # the last decision's state (None: first)
    # where the conversation is, for a detector that records a side call (None: new)
    head: Item | None = field(default=None, compare=False)
    store: Store | None = field(default=None, compare=False)

    @classmethod
    def read(cls, history: Sequence[Item], message: str, system: str | None,
             store: Store | None = None) -> Trajectory:
        turns: list[Exchange] = []
        for item in history:
            if item.kind is ItemKind.USER:
                turns.append(Exchange(str(item.content.get("text", ""))))
            elif item.kind is ItemKind.ASSISTANT and turns:
                turns[-1] = replace(turns[-1], reply=str(item.content.get("text", "")))
        return cls(message, tuple(turns), system, monitoring.latest(history),
                   history[-1] if history else None, store)

    def alone(self) -> Trajectory:
        """The message with nothing before it: what a per-message check sees (the system
        prompt stays, since a single message can be judged against it too)."""
        return Trajectory(self.message, (), self.system, None)

    @property
    def index(self) -> int:
        """The new message's turn number, from 1."""
        return len(self.turns) + 1

    @property
    def first(self) -> str:
        """What the conversation started with (the message itself on the first turn)."""
        return self.turns[0].user if self.turns else self.message

    def recent_users(self, window: int) -> list[str]:
        """The last ``window`` user messages, the new one last."""
        return [*(t.user for t in self.turns[-(window - 1):] if window > 1), self.message]

    def replies(self) -> list[str]:
        return [t.reply for t in self.turns if t.reply is not None]
