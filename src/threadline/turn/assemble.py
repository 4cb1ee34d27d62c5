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

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from threadline.compaction.constraints import Constraint
from threadline.compaction.view import ViewFold
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
from threadline.sequences import Chunked
from threadline.turn.tools import untrusted_view


class MessageMemo:
    """Messages already built for log items, reused on later turns, and each branch's
    assembled history carried from one turn to the next.

    An item never changes, so the message built for it never does either; reusing the same
    object turn after turn saves rebuilding the history and lets the store compare consecutive
    requests by identity instead of by content. A branch's :class:`Shown` is found again by
    its last item's chained hash, which commits to every item before it, so the next turn
    folds in only what was appended since. Bounded: past ``capacity`` messages it starts
    over; it keeps the ``branches`` most recently assembled histories per conversation.
    """

    def __init__(self, capacity: int = 200_000, branches: int = 4) -> None:
        self.capacity = capacity
        self.branches = branches
        self._messages: dict[tuple[str, int, str, bool], Message] = {}
        self._shown: OrderedDict[str | None, list[Shown]] = OrderedDict()
        self._shown_items = 0  # items held by every kept Shown, bounded by ``capacity``
        self._lock = threading.Lock()

    def message(self, item: Item, build: Callable[[Item], Message], *,
                cleared: bool = False) -> Message:
        key = (item.conversation_id, item.seq, item.hash, cleared)
        found = self._messages.get(key)
        if found is None:
            if len(self._messages) >= self.capacity:
                self._messages.clear()
            found = self._messages[key] = build(item)
        return found

    def shown(self, history: Sequence[Item]) -> Shown:
        """The history assembled up to its end, from the state of a shorter one that leads
        it where there is one (claimed, so two threads never extend the same state)."""
        cid = history[-1].conversation_id if history else None
        with self._lock:
            states = self._shown.get(cid, [])
            state = next((s for s in states if s.leads(history)), None)
            if state is not None:
                states.remove(state)
                self._shown_items -= state.fold.length
        state = (state or Shown()).extend(history, self)
        with self._lock:
            states = self._shown.setdefault(cid, [])
            self._shown.move_to_end(cid)
            states.insert(0, state)
            self._shown_items += state.fold.length
            for evicted in states[self.branches:]:
                self._shown_items -= evicted.fold.length
            del states[self.branches:]
            while len(self._shown) > 1 and self._shown_items > self.capacity:
                _, evicted_states = self._shown.popitem(last=False)
                self._shown_items -= sum(e.fold.length for e in evicted_states)
        return state


class Shown:
    """A branch's history as the model is shown it: the view's fold and the messages built
    from it, extended item by item as the branch grows and rebuilt only when a compaction
    changes what earlier items show. Its messages are shared with the requests assembled
    from it (``sequences.Chunked``): a turn adds its own messages and copies none."""

    def __init__(self) -> None:
        self.fold = ViewFold()
        # for the fold's shown items, empty user ones left out
        self.messages: Chunked[Message] = Chunked()
        self.built = 0                     # fold.shown items turned into messages
        self.epoch = 0
        self.ends_with_user = False        # the last message is a user message: the current one
        self.kept: list[Item] = []         # kept blocks folded in (``_kept``), in log order

    def leads(self, history: Sequence[Item]) -> bool:
        """Whether the items folded in are the leading items of ``history``."""
        n, last = self.fold.length, self.fold.last
        if last is None or n > len(history):
            return False
        found = history[n - 1]
        return found is last or (found.seq == last.seq and found.hash == last.hash
                                 and found.conversation_id == last.conversation_id)

    def extend(self, history: Sequence[Item], memo: MessageMemo | None) -> Shown:
        fold = self.fold
        fresh = history[fold.length:]
        fold.extend(fresh)
        kept = [i for i in fresh if i.kind is ItemKind.CONTEXT and i.content.get("kept")]
        self.kept += kept
        if fold.epoch != self.epoch:  # a compaction cut or cleared earlier items: rebuild
            self.messages, self.built, self.epoch = Chunked(), 0, fold.epoch
            self.ends_with_user = False
            kept = self.kept  # every kept block still in view is placed again
        new = fold.shown[self.built:]
        kept = [i for i in kept if i.seq > fold.cut]
        if kept:  # in log order with the messages (a kept block follows its user message)
            new = sorted([*new, *kept], key=lambda i: i.seq)
        cleared = fold.cleared_in_view() if new else frozenset()
        added: list[Message] = []
        for item in new:
            # an imported transcript's empty user message stays in the log, but is never sent
            if is_empty_user_message(item):
                continue
            last = added[-1] if added else self.messages[-1] if self.messages else None
            if not added and last is not None and (
                    _merges(item, last) or _precedes(item, last)):
                # the previous message takes this tool call, or goes after this kept block:
                # it is replaced, not edited
                added.append(last)
                self.messages = self.messages.prefix(len(self.messages) - 1)
            _append(added, item, cleared, memo)
            if item.kind is not ItemKind.CONTEXT:
                self.ends_with_user = item.kind is ItemKind.USER
        self.messages = self.messages.plus(added)
        self.built = len(fold.shown)
        return self


def assemble(history: Sequence[Item], *, system: str | None = None,
             tools: Sequence[ToolSpec] = (), pinned: Sequence[str] = (),
             static: Sequence[str] = (), tail: Sequence[TailBlock] = (),
             memo: MessageMemo | None = None, cache_key: str | None = None) -> Request:
    """The request for the next model call on a branch whose items are ``history``, seen
    through its compaction events (``compaction.view``). ``pinned`` adds facts to pin beside
    the pinned constraints; ``tail`` is what the context providers show for the turn (after
    any constraint set or withdrawn since the last compaction). ``memo`` only saves work: the
    request is the same without it."""
    shown = (memo.shown(history) if memo is not None and history
             else Shown().extend(history, memo))
    fold = shown.fold
    pinned_rules = fold.pinned()
    messages = shown.messages
    current = messages[-1:] if shown.ends_with_user else []
    rules = [c.text for c in pinned_rules] + list(pinned)
    tail = _constraint_changes(fold.added(pinned_rules), fold.withdrawn(pinned_rules)) \
        + list(tail)
    tail_messages = (Message("user", "\n\n".join(f"[{b.label}]\n{b.text}" for b in tail)),) \
        if tail else ()
    summary = () if fold.summary is None else (_summary_message(fold.summary, memo),)
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
    history_messages = messages.prefix(len(messages) - len(current))  # shared, not copied
    return Request(
        tools=tuple(sorted(tools, key=lambda t: t.name)),
        segments=above + (
            Segment(SegmentKind.HISTORY, Stability.CONVERSATION, history_messages,
                    cache_point=True),
            Segment(SegmentKind.CURRENT, Stability.TURN,
                    tail_messages + tuple(current)),
        ),
        compaction_seq=None if fold.newest is None else fold.newest.seq,
        cache_key=cache_key,
        history=HistoryMark(history[-1].conversation_id if history else None,
                            sum(len(s.messages) for s in above), history_messages,
                            None if fold.newest is None else fold.newest.hash),
    )


def _constraint_changes(added: Sequence[Constraint],
                        withdrawn: Sequence[Constraint]) -> list[TailBlock]:
    """Constraints set or withdrawn since the last compaction: in the tail until the next one
    pins them, so a change never resets the cached prefix by itself."""
    blocks = []
    if added:
        blocks.append(TailBlock("standing instructions, in force from now on",
                                "\n".join(f"- {c.text}" for c in added)))
    if withdrawn:
        blocks.append(TailBlock("no longer in force, ignore",
                                "\n".join(f"- {c.text}" for c in withdrawn)))
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


def _merges(item: Item, previous: Message) -> bool:
    """Whether ``item`` joins ``previous`` instead of becoming a message of its own: parallel
    tool calls from one model response travel in one message."""
    return item.kind is ItemKind.TOOL_CALL and previous.role == "assistant" \
        and bool(previous.tool_calls)


def _precedes(item: Item, previous: Message) -> bool:
    """Whether kept block ``item`` goes before ``previous``: its own turn's user message,
    which it was shown just above (in the tail) when that message was new."""
    return item.kind is ItemKind.CONTEXT and previous.item_kind is ItemKind.USER \
        and previous.seq is not None and previous.seq < item.seq


def _kept(item: Item) -> Message:
    """A kept block: a context item's tail blocks, shown in place for the rest of the
    conversation (``content["kept"]``: [label, text] pairs)."""
    text = "\n\n".join(f"[{label}]\n{body}" for label, body in item.content["kept"])
    return Message("user", text, item.seq, item_kind=item.kind, item_hash=item.hash)


def _append(out: list[Message], item: Item, cleared: frozenset[int],
            memo: MessageMemo | None) -> None:
    """Add the message ``item`` becomes to ``out``: a tool call may replace the last one
    instead (``_merges``); a kept block goes before its turn's user message (``_precedes``)."""
    if item.kind is ItemKind.CONTEXT:
        message = _kept(item) if memo is None else memo.message(item, _kept)
        if out and _precedes(item, out[-1]):
            out.insert(len(out) - 1, message)
        else:
            out.append(message)
        return
    if item.kind is ItemKind.TOOL_CALL:
        call = ToolCallRef(item.content["call_id"], item.content["name"],
                           item.content["arguments"])
        previous = out[-1] if out else None
        if previous is not None and _merges(item, previous):
            out[-1] = Message("assistant", previous.content, previous.seq,
                              previous.tool_calls + (call,), item_kind=item.kind,
                              item_hash=item.hash)
        else:
            out.append(Message("assistant", item.content.get("text", ""), item.seq, (call,),
                               item_kind=item.kind, item_hash=item.hash))
        return
    gone = item.seq in cleared
    build = _cleared if gone else _message
    out.append(build(item) if memo is None else memo.message(item, build, cleared=gone))
