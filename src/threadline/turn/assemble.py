"""Assemble: a pure function from conversation state to the request the model is shown.

No clock, no database, no network: the same state always gives the same request, so what the
model saw at any step can be rebuilt and snapshot-tested. Order, most stable first:

    tools (sorted by name)      deploy        ▌ breakpoint
    system                      deploy        ▌ breakpoint
    pinned constraints/facts    conversation
    static context              conversation  ▌ breakpoint
    compaction summary          conversation
    verbatim history            conversation  ▌ breakpoint: the last completed turn
    tail of the current turn    turn          (time, retrieved passages, memories, …)
    the new user message        turn

Anything volatile is in the tail, below every breakpoint, so it never breaks the prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from threadline.items import Item, ItemKind
from threadline.request import (
    Message,
    Request,
    Segment,
    SegmentKind,
    Stability,
    TailBlock,
    ToolCallRef,
    ToolSpec,
)


class MessageMemo:
    """Messages already built for log items, reused on later turns.

    An item never changes, so the message built for it never does either; reusing the same
    object turn after turn saves rebuilding the history and lets the store compare consecutive
    requests by identity instead of by content. Bounded: past ``capacity`` it starts over.
    """

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self._messages: dict[tuple[str, int, str], Message] = {}

    def message(self, item: Item, build: Callable[[Item], Message]) -> Message:
        key = (item.conversation_id, item.seq, item.hash)
        found = self._messages.get(key)
        if found is None:
            if len(self._messages) >= self.capacity:
                self._messages.clear()
            found = self._messages[key] = build(item)
        return found


def assemble(history: Sequence[Item], *, system: str | None = None,
             tools: Sequence[ToolSpec] = (), pinned: Sequence[str] = (),
             static: Sequence[str] = (), tail: Sequence[TailBlock] = (),
             memo: MessageMemo | None = None) -> Request:
    """The request for the next model call on a branch whose items are ``history``.
    ``memo`` only saves work: the request is the same with or without it."""
    view = _since_last_compaction(history)
    summary = view[:1] if view and view[0].kind is ItemKind.COMPACTION else []
    view = view[len(summary):]
    current: list[Item] = []
    if view and view[-1].kind is ItemKind.USER:
        view, current = view[:-1], view[-1:]
    tail_messages = (Message("user", "\n\n".join(f"[{b.label}]\n{b.text}" for b in tail)),) \
        if tail else ()
    return Request(
        tools=tuple(sorted(tools, key=lambda t: t.name)),
        segments=(
            Segment(SegmentKind.TOOLS, Stability.DEPLOY, cache_point=bool(tools)),
            Segment(SegmentKind.SYSTEM, Stability.DEPLOY,
                    (Message("system", system),) if system else (), cache_point=True),
            Segment(SegmentKind.PINNED, Stability.CONVERSATION,
                    (Message("system", "Standing instructions:\n" + "\n".join(
                        f"- {p}" for p in pinned)),) if pinned else ()),
            Segment(SegmentKind.STATIC, Stability.CONVERSATION,
                    tuple(Message("system", text) for text in static), cache_point=True),
            Segment(SegmentKind.SUMMARY, Stability.CONVERSATION, _messages(summary, memo)),
            Segment(SegmentKind.HISTORY, Stability.CONVERSATION, _messages(view, memo),
                    cache_point=True),
            Segment(SegmentKind.CURRENT, Stability.TURN,
                    tail_messages + _messages(current, memo)),
        ),
    )


def _since_last_compaction(history: Sequence[Item]) -> list[Item]:
    """Items the model still sees: after the newest compaction marker, which stands in for
    everything up to its ``through_seq``."""
    for index in range(len(history) - 1, -1, -1):
        marker = history[index]
        if marker.kind is ItemKind.COMPACTION:
            through = marker.content["through_seq"]
            return [marker] + [i for i in history if i.seq > through and i is not marker]
    return list(history)


def _message(item: Item) -> Message:
    """The message a single item becomes (tool calls are merged by ``_messages``)."""
    match item.kind:
        case ItemKind.USER:
            return Message("user", item.content["text"], item.seq, item_kind=item.kind)
        case ItemKind.ASSISTANT:
            return Message("assistant", item.content["text"], item.seq, item_kind=item.kind)
        case ItemKind.TOOL_RESULT:
            return Message("tool", item.content["output"], item.seq,
                           tool_call_id=item.content["call_id"], item_kind=item.kind)
        case ItemKind.COMPACTION:
            return Message("user", "Summary of the conversation so far:\n"
                           + item.content["summary"], item.seq, item_kind=item.kind)
    raise AssertionError(f"{item.kind} items do not map to one message")


def _messages(items: Sequence[Item], memo: MessageMemo | None) -> tuple[Message, ...]:
    out: list[Message] = []
    for item in items:
        if item.kind is ItemKind.NOTE:
            continue  # notes annotate the log; the model does not see them
        if item.kind is ItemKind.TOOL_CALL:
            call = ToolCallRef(item.content["call_id"], item.content["name"],
                               item.content["arguments"])
            previous = out[-1] if out else None
            if previous is not None and previous.role == "assistant" and previous.tool_calls:
                # parallel calls from one model response travel in one message
                out[-1] = Message("assistant", previous.content, previous.seq,
                                  previous.tool_calls + (call,), item_kind=item.kind)
            else:
                out.append(Message("assistant", "", item.seq, (call,), item_kind=item.kind))
            continue
        out.append(_message(item) if memo is None else memo.message(item, _message))
    return tuple(out)
