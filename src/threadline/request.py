"""The provider-neutral request that assembly produces and model backends render.

A request is a list of segments in a fixed order, most stable first: tools, system, pinned
constraints and facts, static context, compaction summary, verbatim history, and the current
turn (its volatile tail, then the new user message). Each segment carries a stability class
saying how often its bytes may change, and whether a cache breakpoint ends it; everything up to
the last breakpoint of request n is a prefix of request n+1 unless a deliberate, recorded reset
(a compaction) happened in between.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from operator import attrgetter
from typing import Any

from threadline.items import canonical_json
from threadline.sequences import Joined, Mapped


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
    # the chained hash of the last log item it shows (None: synthesised): it commits to
    # everything before it on the branch, which is what lets ``shared_history`` skip a scan
    item_hash: str | None = field(default=None, compare=False, repr=False)
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


_OPENAI = attrgetter("_openai")  # Message.to_openai, fetched in C


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
    messages: Sequence[Message] = ()  # a tuple, or the history's shared sequence
    cache_point: bool = False  # a cache breakpoint sits at the end of this segment


@dataclass(frozen=True)
class TailBlock:
    """Something volatile for this turn only (the time, retrieved passages, memories,
    reminders, working state): it goes after the history, never above it."""

    label: str
    text: str


@dataclass(frozen=True, eq=False)
class HistoryMark:
    """Where a request's verbatim history sits among its messages, and which log it shows.

    Set by the assembler, which alone knows the layout. History message ``i`` shows the log
    up to item ``messages[i].item_hash``: a chained hash, committing to every item before it.
    What else the messages depend on (which tool results are cleared, which items are cut,
    the summary) follows from the newest compaction event, named by its own chained hash. So
    two requests whose histories reach the same item at the same position, through the same
    compaction, show the same messages up to there: one comparison confirms it, not a visit
    to each message (``shared_history``).
    """

    conversation_id: str | None
    start: int                      # index of the first history message in the request
    messages: Sequence[Message]     # the history segment's messages (the same sequence)
    compaction_hash: str | None     # the newest compaction event the view went through

    @property
    def end(self) -> int:
        return self.start + len(self.messages)


def shared_history(before: HistoryMark, after: HistoryMark) -> int:
    """The end of ``before``'s history (a message index) if ``after``'s history shows the same
    log up to there, as their chained hashes prove; 0 when they do not. What sits above the
    history (the ``start`` messages: system, pinned, static, summary) is not covered: the
    caller compares it, as it is small."""
    n = len(before.messages)
    if before.conversation_id != after.conversation_id or before.start != after.start \
            or before.compaction_hash != after.compaction_hash or n > len(after.messages):
        return 0
    if n == 0:
        return before.start
    mine, theirs = before.messages[-1], after.messages[n - 1]
    # The same item (a seq names one item of the conversation, and with it every item
    # before it on its branch), with the same chained hash: the same items, read through the
    # same view. A cleared tool result's placeholder names its seq, which the hash does not
    # cover; the seq check does. And message n - 1 of ``after`` ends at that item too, so it
    # folded in nothing more.
    if mine.item_hash is None or mine.item_hash != theirs.item_hash or mine.seq != theirs.seq:
        return 0
    return before.end


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
    # where the history sits and which log it shows, from the assembler (None: built by hand;
    # a request is then compared message by message)
    history: HistoryMark | None = field(default=None, compare=False, repr=False)

    @cached_property
    def messages(self) -> Sequence[Message]:
        # the segments end to end, read in place: at thousands of turns a copy of the history
        # per request streams it through the CPU's caches (``sequences``)
        return Joined(segment.messages for segment in self.segments)

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
        return list(self.openai_tuple())

    def openai_tuple(self) -> Sequence[dict[str, Any]]:
        """The messages in the OpenAI shape, shared: the dicts each message built once, read
        through the messages on access (what a :class:`SentRequest` records; it reads as a
        tuple). Treat as read-only."""
        return self._openai_joined

    @cached_property
    def _openai_joined(self) -> Sequence[dict[str, Any]]:
        return Mapped(self.messages, _OPENAI)
