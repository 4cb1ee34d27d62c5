"""Assemble: a pure function from conversation state to the request the model is shown.

No clock, no database, no network: the same state always gives the same request, so what the
model saw at any step can be rebuilt and snapshot-tested. Order, most stable first: tools
(sorted by name), system, verbatim history, then the current turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from threadline.items import Item, ItemKind
from threadline.request import (
    Message,
    Request,
    Segment,
    SegmentKind,
    Stability,
    ToolCallRef,
    ToolSpec,
)


def assemble(history: Sequence[Item], *, system: str | None = None,
             tools: Sequence[ToolSpec] = ()) -> Request:
    """The request for the next model call on a branch whose items are ``history``."""
    view = _since_last_compaction(history)
    current: list[Item] = []
    if view and view[-1].kind is ItemKind.USER:
        view, current = view[:-1], view[-1:]
    system_messages = (Message("system", system),) if system else ()
    return Request(
        tools=tuple(sorted(tools, key=lambda t: t.name)),
        segments=(
            Segment(SegmentKind.TOOLS, Stability.DEPLOY),
            Segment(SegmentKind.SYSTEM, Stability.CONVERSATION, system_messages),
            Segment(SegmentKind.HISTORY, Stability.CONVERSATION, _messages(view)),
            Segment(SegmentKind.CURRENT, Stability.TURN, _messages(current)),
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


def _messages(items: Sequence[Item]) -> tuple[Message, ...]:
    out: list[Message] = []
    for item in items:
        match item.kind:
            case ItemKind.USER:
                out.append(Message("user", item.content["text"], item.seq))
            case ItemKind.ASSISTANT:
                out.append(Message("assistant", item.content["text"], item.seq))
            case ItemKind.TOOL_CALL:
                call = ToolCallRef(item.content["call_id"], item.content["name"],
                                   item.content["arguments"])
                previous = out[-1] if out else None
                if previous is not None and previous.role == "assistant" \
                        and previous.tool_calls:
                    # parallel calls from one model response travel in one message
                    out[-1] = Message("assistant", previous.content, previous.seq,
                                      previous.tool_calls + (call,))
                else:
                    out.append(Message("assistant", "", item.seq, (call,)))
            case ItemKind.TOOL_RESULT:
                out.append(Message("tool", item.content["output"], item.seq,
                                   tool_call_id=item.content["call_id"]))
            case ItemKind.COMPACTION:
                out.append(Message("user", "Summary of the conversation so far:\n"
                                   + item.content["summary"], item.seq))
            case ItemKind.NOTE:
                pass  # notes annotate the log; the model does not see them
    return tuple(out)
