"""The provider-neutral request that assembly produces and model backends render.

A request is a list of segments in a fixed order (tools, system, history, current turn). Each
segment carries a stability class saying how often its bytes may change: a segment can only
change when everything below it does too, which is what keeps request n a prefix of request n+1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from threadline.items import canonical_json


class Stability(StrEnum):
    DEPLOY = "deploy"              # changes when the application is redeployed
    CONVERSATION = "conversation"  # fixed for the life of a conversation branch
    TURN = "turn"                  # new on every turn


class SegmentKind(StrEnum):
    TOOLS = "tools"
    SYSTEM = "system"
    HISTORY = "history"
    CURRENT = "current"


@dataclass(frozen=True)
class ToolCallRef:
    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Message:
    """One chat message. ``seq`` names the log item it came from (None for synthesised ones)."""

    role: str  # system | user | assistant | tool
    content: str
    seq: int | None = None
    tool_calls: tuple[ToolCallRef, ...] = ()
    tool_call_id: str | None = None
    item_kind: str | None = None  # the kind of log item it came from (None: synthesised)
    _openai: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": canonical_json(c.arguments)}}
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        object.__setattr__(self, "_openai", out)

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat-completions shape, also what chat templates expect. Built once and
        shared: consecutive requests that reuse a message share its dict, which makes
        comparing them a pointer check per message. Treat it as read-only."""
        return self._openai


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def to_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description":
                self.description, "parameters": dict(self.parameters)}}


@dataclass(frozen=True)
class Segment:
    kind: SegmentKind
    stability: Stability
    messages: tuple[Message, ...] = ()


@dataclass(frozen=True)
class Request:
    """What the model is asked, before any provider-specific rendering."""

    tools: tuple[ToolSpec, ...]
    segments: tuple[Segment, ...]

    @property
    def messages(self) -> list[Message]:
        return [m for segment in self.segments for m in segment.messages]

    def segment(self, kind: SegmentKind) -> Segment | None:
        return next((s for s in self.segments if s.kind is kind), None)

    def openai_messages(self) -> list[dict[str, Any]]:
        return [m.to_openai() for m in self.messages]
