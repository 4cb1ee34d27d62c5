"""The provider-neutral request that assembly produces and model backends render.

A request is a list of segments in a fixed order, most stable first: tools, system, pinned
constraints and facts, static context, compaction summary, verbatim history, and the current
turn (its volatile tail, then the new user message). Each segment carries a stability class
saying how often its bytes may change, and whether a cache breakpoint ends it; everything up to
the last breakpoint of request n is a prefix of request n+1 unless a deliberate, recorded reset
(a compaction) happened in between.
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
    PINNED = "pinned"      # standing constraints and facts, verbatim
    STATIC = "static"      # documents fixed for the conversation
    SUMMARY = "summary"    # the newest compaction marker
    HISTORY = "history"    # verbatim items since then
    CURRENT = "current"    # this turn: the volatile tail, then the new message


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
    cache_point: bool = False  # a cache breakpoint sits at the end of this segment


@dataclass(frozen=True)
class TailBlock:
    """Something volatile for this turn only (the time, retrieved passages, memories,
    reminders, working state): it goes after the history, never above it."""

    label: str
    text: str


@dataclass(frozen=True)
class Request:
    """What the model is asked, before any provider-specific rendering."""

    tools: tuple[ToolSpec, ...]
    segments: tuple[Segment, ...]
    compaction_seq: int | None = None  # the newest compaction event the view went through
    # "auto": the model may call tools; "none": it must answer in text (the tool loop's last
    # call). The tools stay in the request either way, so its prefix does not change.
    tool_choice: str = "auto"
    # stable per conversation branch: sent as ``prompt_cache_key``, and what routes the
    # request to the serving machine that holds its prefix
    cache_key: str | None = None

    @property
    def messages(self) -> list[Message]:
        return [m for segment in self.segments for m in segment.messages]

    def cache_points(self) -> list[int]:
        """Message counts at which a breakpoint sits (0: after the tools), in order, once."""
        points: list[int] = []
        count = 0
        for segment in self.segments:
            count += len(segment.messages)
            if segment.cache_point and (not points or points[-1] != count):
                points.append(count)
        return points

    def segment(self, kind: SegmentKind) -> Segment | None:
        return next((s for s in self.segments if s.kind is kind), None)

    def openai_messages(self) -> list[dict[str, Any]]:
        return [m.to_openai() for m in self.messages]
