"""What the call page shows: one recorded model call, read back exactly, laid out for a reader.

Everything here comes from the record (``Store.call``: the request as sent, rebuilt from its
stored deltas, and the prefix report made when it was sent) and from the log items of the
call's own turn; nothing the record already says is recomputed. The shaded prefix of the raw
bytes is exactly the report's ``reused_bytes`` of the request's exact bytes
(``SentRequest.exact_bytes``: the rendered prompt, or the canonical JSON payload), and the
first divergence is the report's.

The request's messages are laid out by the report's layout (the assembler's segments), with
the current turn's segment split in two as the assembler built it: the tail (what the
providers found for this turn) and the new user message. A backend that reshaped the messages
(Anthropic's: the system prompt moves to ``system``, turns merge) sent as many messages as its
payload has, not as the layout; those are shown as sent, in one list.

Each message is marked by where its own bytes sit against the reused prefix (its content in a
rendered prompt, its JSON in a payload, found in order in the exact text): wholly inside,
cut by it, or after it. Finding them needs only this call's request; the previous call's is
read for the diff, and, for a request so large that reading a second one would dominate the
page (``DIFF_INLINE_BYTES``), the diff is a page of its own (``call_diff``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.cache.prefix import PrefixReport
from threadline.calls import ModelCall, SentRequest, shared_messages
from threadline.inspector.call_diff import (
    SEGMENTS,
    Messages,
    SegmentDiff,
    message_extra,
    message_text,
    segment_diff,
)
from threadline.items import Item, ItemKind, canonical_json
from threadline.stores.base import Store

__all__ = ["DIFF_INLINE_BYTES", "HISTORY_PAGE", "SEGMENTS", "CallPage", "DiffPage",
           "call_diff", "call_page"]

HISTORY_PAGE = 100            # history messages per page of a long request
DIFF_INLINE_BYTES = 256 * 1024  # a previous request larger than this: the diff on its own page
MAX_TURN_ITEMS = 500          # how far back the turn's own items are looked for
_MESSAGE_KINDS = {ItemKind.USER, ItemKind.ASSISTANT, ItemKind.TOOL_CALL, ItemKind.TOOL_RESULT}


@dataclass(frozen=True)
class ShownMessage:
    index: int    # position in the request
    role: str
    content: str
    extra: str    # tool calls or the tool call id, as JSON ("" for neither)
    reuse: str    # "reused" (all its bytes repeat the previous call), "diverges", "new"


@dataclass(frozen=True)
class Page:
    number: int   # 1-based
    pages: int
    first: int    # index of the first message shown (in the request)
    last: int     # index of the last one shown


@dataclass(frozen=True)
class ShownSegment:
    kind: str
    stability: str
    start: int                          # index of its first message in the request
    count: int                          # its messages in the request
    messages: tuple[ShownMessage, ...]  # those shown (one page of a long history)
    page: Page | None = None            # set when the segment is paginated


@dataclass(frozen=True)
class RawBytes:
    """The exact bytes sent, split where reuse of the previous call's bytes ends."""

    reused: str        # the first ``reused_bytes`` bytes, as text
    rest: str
    reused_bytes: int
    total_bytes: int
    what: str          # "rendered prompt" or "JSON payload"


@dataclass(frozen=True)
class CallPage:
    call: ModelCall
    prefix: PrefixReport | None
    previous: ModelCall | None       # read only for the diff (None: none, or not inline)
    laid_out: bool                   # False: messages shown as sent (a reshaping backend)
    segments: tuple[ShownSegment, ...]
    tools: tuple[str, ...]           # each tool definition sent, as canonical JSON
    raw: RawBytes
    diff: tuple[SegmentDiff, ...] | None  # None: no previous call, or the diff is apart
    retrievals: tuple[Mapping[str, Any], ...]  # the turn's retrieval items' content
    recalls: tuple[Mapping[str, Any], ...]     # the turn's memory recall items' content

    @property
    def previous_call_id(self) -> str | None:
        return None if self.prefix is None else self.prefix.previous_call_id

    @property
    def diff_apart(self) -> bool:
        """The diff is on its own page (the previous request is too large to read here)."""
        return self.previous_call_id is not None and self.diff is None

    @property
    def divergence_message(self) -> int | None:
        d = None if self.prefix is None else self.prefix.divergence
        return None if d is None else d.message

    @property
    def endpoint(self) -> str | None:
        found = self.call.response.get("endpoint")
        return None if found is None else str(found)


@dataclass(frozen=True)
class DiffPage:
    call: ModelCall
    previous: ModelCall | None
    diff: tuple[SegmentDiff, ...] | None


def call_page(store: Store, call: ModelCall, *, history_page: int | None = None) -> CallPage:
    """The page for ``call`` (read with its request; the caller has checked access)."""
    sent = call.request
    assert sent is not None, "Store.call() loads the request"
    prefix = None if call.prefix is None else PrefixReport.from_json(call.prefix)
    raw = raw_bytes(sent.prompt if sent.prompt is not None else sent.payload_json(),
                    0 if prefix is None else prefix.reused_bytes,
                    "rendered prompt" if sent.rendering is not None else "JSON payload")
    divergence = None if prefix is None or prefix.divergence is None \
        else prefix.divergence.message
    items = turn_items(store, call)
    layout = _layout(call, items)
    laid_out = layout is not None
    if layout is None:
        layout = [("messages", "as sent", 0, len(sent.messages))]
    shown = [_shown(kind, start, count, divergence, history_page)
             for kind, _, start, count in layout]
    reuse = _reuse_by_bytes(sent, raw, divergence,
                            [i for first, last, _ in shown for i in range(first, last)])
    previous = None
    if prefix is not None and prefix.previous_call_id is not None and (
            reuse is None or prefix.previous_bytes <= DIFF_INLINE_BYTES):
        previous = store.call(prefix.previous_call_id)
    if reuse is None:  # a message not found verbatim: compare the messages instead
        shared = 0 if previous is None else shared_messages(_sent(previous), sent)
        reuse = {i: "reused" if i < shared else "diverges" if i == divergence else "new"
                 for i in range(len(sent.messages))}
    segments = tuple(
        ShownSegment(kind, stability, start, count,
                     tuple(_message(sent.messages, i, reuse[i]) for i in range(first, last)),
                     page)
        for (kind, stability, start, count), (first, last, page) in zip(layout, shown,
                                                                        strict=True))
    diff = None
    if previous is not None and prefix is not None \
            and prefix.previous_bytes <= DIFF_INLINE_BYTES:
        diff = segment_diff(_by_segment(store, previous), _by_segment(store, call, items))
    return CallPage(
        call=call, prefix=prefix, previous=previous, laid_out=laid_out, segments=segments,
        tools=tuple(canonical_json(t) for t in _tools(sent.params)), raw=raw, diff=diff,
        retrievals=tuple(i.content for i in reversed(items) if i.kind is ItemKind.RETRIEVAL),
        recalls=tuple(i.content for i in reversed(items) if i.kind is ItemKind.RECALL))


def call_diff(store: Store, call: ModelCall) -> DiffPage:
    """The segment-aware diff of ``call`` against the call its prefix report compared it
    with (None where there was none)."""
    previous_id = None if call.prefix is None else call.prefix.get("previous_call_id")
    if previous_id is None:
        return DiffPage(call, None, None)
    previous = store.call(str(previous_id))
    return DiffPage(call, previous, segment_diff(_by_segment(store, previous),
                                                 _by_segment(store, call)))


def _sent(call: ModelCall) -> SentRequest:
    assert call.request is not None, "Store.call() loads the request"
    return call.request


# -- the turn's items and the layout ----------------------------------------------------------

def turn_items(store: Store, call: ModelCall) -> list[Item]:
    """The items of the call's turn up to the last one it was shown, newest first (walking
    the parent chain, so a fork's call reads its own branch)."""
    out: list[Item] = []
    seq: int | None = call.head_seq
    turn = None
    while seq is not None and len(out) < MAX_TURN_ITEMS:
        item = store.item(call.conversation_id, seq)
        if turn is not None and item.turn != turn:
            break
        turn = item.turn
        out.append(item)
        seq = item.parent_seq
    return out


def _ends_with_message(items: Sequence[Item]) -> bool:
    """Whether the request ends with the turn's new user message: the newest message item
    it was shown is the user's (in a tool loop's later calls it is a tool result)."""
    newest = next((i for i in items if i.kind in _MESSAGE_KINDS), None)
    return newest is not None and newest.kind is ItemKind.USER


def _layout(call: ModelCall, items: Sequence[Item]) -> list[tuple[str, str, int, int]] | None:
    """The report's layout with ``current`` split into ``tail`` and ``message``; None where
    the messages sent are not the layout's (a reshaping backend, or no report)."""
    sent = _sent(call)
    if call.prefix is None:
        return None
    layout = [(x["segment"], x["stability"], x["start"], x["count"])
              for x in call.prefix["layout"]]
    if sum(count for *_, count in layout) != len(sent.messages):
        return None
    out = [("tools", "deploy", 0, 0)] if not any(k == "tools" for k, *_ in layout) else []
    for kind, stability, start, count in layout:
        if kind != "current":
            out.append((kind, stability, start, count))
            continue
        last = sent.messages[start + count - 1] if count else None
        message = 1 if last is not None and last.get("role") == "user" \
            and _ends_with_message(items) else 0
        out.append(("tail", stability, start, count - message))
        out.append(("message", stability, start + count - message, message))
    return out


def _by_segment(store: Store, call: ModelCall, items: Sequence[Item] | None = None
                ) -> Messages:
    """The call's messages by segment (its tool definitions as the ``tools`` segment)."""
    sent = _sent(call)
    layout = _layout(call, turn_items(store, call) if items is None else items) \
        or [("messages", "", 0, len(sent.messages))]
    out = {kind: list(sent.messages[start:start + count]) for kind, _, start, count in layout}
    out["tools"] = [dict(t) for t in _tools(sent.params)]
    return out


def _tools(params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tools = params.get("tools")
    return [t for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) else []


def _shown(kind: str, start: int, count: int, divergence: int | None,
           history_page: int | None) -> tuple[int, int, Page | None]:
    """The messages of a segment to show, ``first`` to ``last`` (exclusive): all of them, or
    one page of a long history (by default, the one the divergence is in, else the last)."""
    if kind not in ("history", "messages") or count <= HISTORY_PAGE:
        return start, start + count, None
    pages = -(-count // HISTORY_PAGE)
    if history_page is None:
        if divergence is not None and start <= divergence < start + count:
            history_page = (divergence - start) // HISTORY_PAGE + 1
        else:
            history_page = pages
    number = min(max(history_page, 1), pages)
    first = start + (number - 1) * HISTORY_PAGE
    last = min(first + HISTORY_PAGE, start + count)
    return first, last, Page(number, pages, first, last - 1)


def _message(messages: Sequence[Mapping[str, Any]], i: int, reuse: str) -> ShownMessage:
    message = messages[i]
    return ShownMessage(i, str(message.get("role", "")),
                        message_text(message.get("content", "")), message_extra(message), reuse)


# -- the raw bytes, and each message's place in them ------------------------------------------

def raw_bytes(text: str, reused: int, what: str) -> RawBytes:
    """``text`` (the exact bytes, decoded: ``SentRequest.exact_bytes`` is its UTF-8) split
    after ``reused`` bytes, moved back to a character boundary (where a report measured on
    characters always puts it)."""
    if text.isascii():  # a byte is a character: no need to encode a large request
        cut = max(0, min(reused, len(text)))
        return RawBytes(text[:cut], text[cut:], cut, len(text), what)
    exact = text.encode("utf-8")
    cut = max(0, min(reused, len(exact)))
    while 0 < cut < len(exact) and exact[cut] & 0xC0 == 0x80:
        cut -= 1
    head = exact[:cut].decode("utf-8")
    return RawBytes(head, text[len(head):], cut, len(exact), what)


def message_spans(sent: SentRequest, text: str, wanted: Sequence[int]
                  ) -> dict[int, tuple[int, int]] | None:
    """Where each ``wanted`` message's own text sits in ``text`` (the exact bytes, decoded),
    in characters; None where one is not there verbatim (a template that escapes).

    In a rendered prompt, its content, each found after the one before. In a JSON payload,
    its canonical JSON, where the payload's serialisation puts it: after the messages before
    it or before the messages after it, whichever are fewer (serialised at once: one
    C-level encode), and checked against the text. Only the messages on the page are
    serialised one by one."""
    messages = sent.messages
    if sent.rendering is not None:
        spans, cursor = {}, 0
        for i, message in enumerate(messages):
            needle = message_text(message.get("content", ""))
            at = text.find(needle, cursor)
            if at < 0:
                return None
            cursor = at + len(needle)
            spans[i] = (at, cursor)
        return spans
    head, end = _array_bounds(sent, text)
    if head < 0:
        return None
    out: dict[int, tuple[int, int]] = {}
    position, at = 0, -1
    for i in sorted(wanted):
        if i != at:  # a run starts: from whichever end of the array is nearer
            if i <= len(messages) - i:
                position = head + (len(canonical_json(list(messages[:i]))) - 1 if i else 0)
            else:
                position = end - len(canonical_json(list(messages[i:]))) + 2
        needle = canonical_json(messages[i])
        if not text.startswith(needle, position):
            return None
        out[i] = (position, position + len(needle))
        position, at = position + len(needle) + 1, i + 1
    return out


def _array_bounds(sent: SentRequest, text: str) -> tuple[int, int]:
    """In a JSON payload's text, where its first message starts and where the messages'
    closing bracket is ((-1, -1) where the text is not laid out so): canonical JSON sorts
    the keys, so what follows the messages is the params named after "messages"."""
    fields = {"model": sent.model, **sent.params}
    after = "".join(f",{canonical_json(k)}:{canonical_json(fields[k])}"
                    for k in sorted(k for k in fields if isinstance(k, str) and k > "messages"))
    head = text.find('"messages":[')
    if head < 0 or not text.endswith("]" + after + "}"):
        return -1, -1
    return head + len('"messages":['), len(text) - len(after) - 2


def _reuse_by_bytes(sent: SentRequest, raw: RawBytes, divergence: int | None,
                    wanted: Sequence[int]) -> dict[int, str] | None:
    """Each ``wanted`` message: "reused" if it ends inside the reused prefix, "diverges"
    where the prefix ends inside it (and always the report's divergence), else "new"."""
    spans = message_spans(sent, raw.reused + raw.rest, wanted)
    if spans is None:
        return None
    cut = len(raw.reused)
    return {i: "diverges" if i == divergence or start < cut < end
            else "reused" if cut and end <= cut else "new"
            for i, (start, end) in spans.items()}
