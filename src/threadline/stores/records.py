"""What the log's reads return beside items and calls: a conversation's summary, and a
reply as it streams. A leaf module, so the protocols beside ``Store`` can name them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from threadline.items import Conversation, format_time


@dataclass(frozen=True)
class Generation:
    """A reply as it streams: the text so far, and once done, the outcome (the finished turn
    as JSON, or an error body)."""

    id: str
    conversation_id: str
    text: str
    done: bool = False
    result: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ConversationSummary:
    conversation: Conversation
    items: int
    turns: int
    branches: int
    calls: int
    updated_at: datetime
    first_message: str | None

    @property
    def title(self) -> str:
        if self.conversation.title:
            return self.conversation.title
        text = " ".join((self.first_message or "").split())
        return text if len(text) <= 60 else text[:59] + "…"

    def to_json(self) -> dict[str, Any]:
        return {**self.conversation.to_json(), "title": self.title, "items": self.items,
                "turns": self.turns, "branches": self.branches, "calls": self.calls,
                "updated_at": format_time(self.updated_at)}
