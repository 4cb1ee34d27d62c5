"""Assemble: a pure function from conversation state to the request the model is shown.

No clock, no database, no network: the same state always gives the same request, so what the
model saw at any step can be rebuilt and snapshot-tested. Order, most stable first:

    tools (sorted by name)      deploy        ▌ breakpoint
    system                      deploy        ▌ breakpoint
    pinned constraints/facts    conversation
    static context              conversation  ▌ breakpoint
    compaction summary          conversation
    verbatim history            conversation  ▌ breakpoint: the last completed turn
    tail of the current turn    turn          (time, retrieved passages, memories,
                                              working state, constraint changes, …)
    the new user message        turn

Anything volatile is in the tail, below every breakpoint, so it never breaks the prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from threadline.compaction.view import ContextView, context_view
from threadline.items import Item, ItemKind, is_empty_user_message
from threadline.request import (
    HistoryMark,
    Message,
    Request,
    Segment,
    SegmentKind,
    Stability,
    TailBlock,
    ToolCallRef,
    ToolSpec,
)
from threadline.turn.tools import untrusted_view


class MessageMemo:
    """Messages already built for log items, reused on later turns.

    An item never changes, so the message built for it never does either; reusing the same
    object turn after turn saves rebuilding the history and lets the store compare consecutive
    requests by identity instead of by content. Bounded: past ``capacity`` it starts over.
    """

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self._messages: dict[tuple[str, int, str, bool], Message] = {}

    def message(self, item: Item, build: Callable[[Item], Message], *,
                cleared: bool = False) -> Message:
        key = (item.conversation_id, item.seq, item.hash, cleared)
        found = self._messages.get(key)
        if found is None:
            if len(self._messages) >= self.capacity:
                self._messages.clear()
            found = self._messages[key] = build(item)
        return found


def assemble(history: Sequence[Item], *, system: str | None = None,
             tools: Sequence[ToolSpec] = (), pinned: Sequence[str] = (),
             static: Sequence[str] = (), tail: Sequence[TailBlock] = (),
             memo: MessageMemo | None = None, cache_key: str | None = None) -> Request:
    """The request for the next model call on a branch whose items are ``history``, seen
    through its compaction events (``compaction.view``). ``pinned`` adds facts to pin beside
    the pinned constraints; ``tail`` is what the context providers show for the turn (after
    any constraint set or withdrawn since the last compaction). ``memo`` only saves work: the
    request is the same without it."""
    view = context_view(history)
    # an imported transcript's empty user message stays in the log, but is never sent
    shown = [item for item in view.items if not is_empty_user_message(item)]
    current: list[Item] = []
    if shown and shown[-1].kind is ItemKind.USER:
        shown, current = shown[:-1], shown[-1:]
    rules = [c.text for c in view.pinned] + list(pinned)
    tail = _constraint_changes(view) + list(tail)
    tail_messages = (Message("user", "\n\n".join(f"[{b.label}]\n{b.text}" for b in tail)),) \
        if tail else ()
    summary = () if view.summary is None else (_summary_message(view.summary, memo),)
    above = (
        Segment(SegmentKind.TOOLS, Stability.DEPLOY, cache_point=bool(tools)),
        Segment(SegmentKind.SYSTEM, Stability.DEPLOY,
                (Message("system", system),) if system else (), cache_point=True),
        Segment(SegmentKind.PINNED, Stability.CONVERSATION,
                (Message("system", "Standing instructions:\n" + "\n".join(
                    f"- {rule}" for rule in rules)),) if rules else ()),
        Segment(SegmentKind.STATIC, Stability.CONVERSATION,
                tuple(Message("system", text) for text in static), cache_point=True),
        Segment(SegmentKind.SUMMARY, Stability.CONVERSATION, summary),
    )
    history_messages = _messages(shown, view.cleared, memo)
    return Request(
        tools=tuple(sorted(tools, key=lambda t: t.name)),
        segments=above + (
            Segment(SegmentKind.HISTORY, Stability.CONVERSATION, history_messages,
                    cache_point=True),
            Segment(SegmentKind.CURRENT, Stability.TURN,
                    tail_messages + _messages(current, view.cleared, memo)),
        ),
        compaction_seq=None if view.compaction is None else view.compaction.seq,
        cache_key=cache_key,
        history=HistoryMark(history[0].conversation_id if history else None,
                            sum(len(s.messages) for s in above), history_messages,
                            None if view.compaction is None else view.compaction.hash),
    )


def _constraint_changes(view: ContextView) -> list[TailBlock]:
    """Constraints set or withdrawn since the last compaction: in the tail until the next one
    pins them, so a change never resets the cached prefix by itself."""
    blocks = []
    if view.added:
        blocks.append(TailBlock("standing instructions, in force from now on",
                                "\n".join(f"- {c.text}" for c in view.added)))
    if view.withdrawn:
        blocks.append(TailBlock("no longer in force, ignore",
                                "\n".join(f"- {c.text}" for c in view.withdrawn)))
    return blocks


def _summary_message(marker: Item, memo: MessageMemo | None) -> Message:
    def build(item: Item) -> Message:
        return Message("user", "Summary of the conversation so far:\n"
                       + item.content["summary"], item.seq, item_kind=item.kind,
                       item_hash=item.hash)
    return build(marker) if memo is None else memo.message(marker, build)


def placeholder(item: Item) -> str:
    """What a cleared tool result shows instead of its output."""
    size = len(item.content["output"])
    return (f"[tool result cleared from the context ({size} characters); it is kept as item "
            f"#{item.seq}: fetch_item({item.seq}) returns it verbatim]")


def _message(item: Item) -> Message:
    """The message a single item becomes (tool calls are merged by ``_messages``)."""
    match item.kind:
        case ItemKind.USER:
            return Message("user", item.content["text"], item.seq, item_kind=item.kind,
                           item_hash=item.hash)
        case ItemKind.ASSISTANT:
            return Message("assistant", item.content["text"], item.seq, item_kind=item.kind,
                           item_hash=item.hash)
        case ItemKind.TOOL_RESULT:
            output = item.content["output"]
            if item.content.get("untrusted"):  # a tool's own output: data, not instructions
                output = untrusted_view(output, item.content.get("tool", "tool"))
            return Message("tool", output, item.seq, tool_call_id=item.content["call_id"],
                           item_kind=item.kind, item_hash=item.hash)
    raise AssertionError(f"{item.kind} items do not map to one message")


def _cleared(item: Item) -> Message:
    return Message("tool", placeholder(item), item.seq, tool_call_id=item.content["call_id"],
                   item_kind=item.kind, item_hash=item.hash)


def _messages(items: Sequence[Item], cleared: frozenset[int],
              memo: MessageMemo | None) -> tuple[Message, ...]:
    out: list[Message] = []
    for item in items:
        if item.kind is ItemKind.TOOL_CALL:
            call = ToolCallRef(item.content["call_id"], item.content["name"],
                               item.content["arguments"])
            previous = out[-1] if out else None
            if previous is not None and previous.role == "assistant" and previous.tool_calls:
                # parallel calls from one model response travel in one message
                out[-1] = Message("assistant", previous.content, previous.seq,
                                  previous.tool_calls + (call,), item_kind=item.kind,
                                  item_hash=item.hash)
            else:
                out.append(Message("assistant", item.content.get("text", ""), item.seq, (call,),
                                   item_kind=item.kind, item_hash=item.hash))
            continue
        gone = item.seq in cleared
        build = _cleared if gone else _message
        out.append(build(item) if memo is None else memo.message(item, build, cleared=gone))
    return tuple(out)
