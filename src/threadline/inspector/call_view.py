"""What the call page shows: one recorded model call, read back exactly, laid out for a reader.

Everything here comes from the record (``Store.call``: the request as sent, rebuilt from its
stored deltas, and the prefix report made when it was sent) and from the log items of the
call's own turn; nothing is recomputed that the record already says. In particular the shaded
prefix of the raw bytes is exactly the report's ``reused_bytes`` of the request's exact bytes
(``SentRequest.exact_bytes``: the rendered prompt, or the canonical JSON payload), and the
first divergence is the report's.

The request's messages are laid out by the report's layout (the assembler's segments), with
the current turn's segment split in two as the assembler built it: the tail (what the
providers found for this turn) and the new user message. A backend that reshaped the messages
(Anthropic's: the system prompt moves to ``system``, turns merge) has as many messages as its
payload, not as the layout; those are shown as sent, in one list.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.cache.prefix import PrefixReport
from threadline.calls import ModelCall, shared_messages
from threadline.items import Item, ItemKind, canonical_json
from threadline.sequences import common_prefix_len
from threadline.stores.base import Store

SEGMENTS = ("tools", "system", "pinned", "static", "summary", "history", "tail", "message")
HISTORY_PAGE = 100      # history messages per page of a long request
MAX_TURN_ITEMS = 500    # how far back the turn's own items are looked for
MAX_DIFF_LINES = 6000   # per side: past this a segment's diff is summarised, not computed
CONTEXT_LINES = 3       # unchanged lines kept around each change in a diff
_MESSAGE_KINDS = {ItemKind.USER, ItemKind.ASSISTANT, ItemKind.TOOL_CALL, ItemKind.TOOL_RESULT}


@dataclass(frozen=True)
class ShownMessage:
    index: int    # position in the request
    role: str
    content: str
    extra: str    # tool calls or the tool call id, as JSON ("" for neither)
    reuse: str    # "reused" (the whole message repeats the previous call), "diverges", "new"


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
    start: int                       # index of its first message in the request
    count: int                       # its messages in the request
    messages: tuple[ShownMessage, ...]  # those shown (one page of a long history)
    page: Page | None = None         # set when the segment is paginated


@dataclass(frozen=True)
class RawBytes:
    """The exact bytes sent, split where reuse of the previous call's bytes ends."""

    reused: str        # the first ``reused_bytes`` bytes, as text
    rest: str
    reused_bytes: int
    total_bytes: int
    what: str          # "rendered prompt" or "JSON payload"


@dataclass(frozen=True)
class DiffRow:
    op: str    # " " unchanged, "-" only in the previous call, "+" only in this one, "…" skipped
    text: str


@dataclass(frozen=True)
class SegmentDiff:
    kind: str
    status: str                 # "same", "changed", "added", "removed"
    old_count: int
    new_count: int
    rows: tuple[DiffRow, ...]   # empty when the segment is the same


@dataclass(frozen=True)
class CallPage:
    call: ModelCall
    prefix: PrefixReport | None
    previous: ModelCall | None
    laid_out: bool                   # False: messages shown as sent (a reshaping backend)
    segments: tuple[ShownSegment, ...]
    tools: tuple[str, ...]           # each tool definition sent, as canonical JSON
    raw: RawBytes
    diff: tuple[SegmentDiff, ...] | None  # None without a previous call
    retrievals: tuple[Mapping[str, Any], ...]  # the turn's retrieval items' content
    recalls: tuple[Mapping[str, Any], ...]     # the turn's memory recall items' content
    divergence_message: int | None   # the request message the first divergence is in

    @property
    def endpoint(self) -> str | None:
        found = self.call.response.get("endpoint")
        return None if found is None else str(found)


def call_page(store: Store, call: ModelCall, *, history_page: int | None = None) -> CallPage:
    """The page for ``call`` (read with its request; the caller has checked access)."""
    sent = call.request
    assert sent is not None, "Store.call() loads the request"
    prefix = None if call.prefix is None else PrefixReport.from_json(call.prefix)
    previous = None
    if prefix is not None and prefix.previous_call_id is not None:
        previous = store.call(prefix.previous_call_id)
    items = turn_items(store, call)
    layout = _layout(call, items)
    shared = 0
    if previous is not None and previous.request is not None:
        shared = shared_messages(previous.request, sent)
    divergence = None if prefix is None or prefix.divergence is None \
        else prefix.divergence.message
    laid_out = layout is not None
    if layout is None:
        layout = [("messages", "as sent", 0, len(sent.messages))]
    segments = tuple(_segment(kind, stability, start, count, sent.messages, shared,
                              divergence, history_page)
                     for kind, stability, start, count in layout)
    diff = None
    if previous is not None and previous.request is not None:
        diff = segment_diff(_split(previous, turn_items(store, previous)),
                            _split(call, items))
    return CallPage(
        call=call, prefix=prefix, previous=previous, laid_out=laid_out, segments=segments,
        tools=tuple(canonical_json(t) for t in _tools(sent.params)),
        raw=raw_bytes(sent.exact_bytes(), 0 if prefix is None else prefix.reused_bytes,
                      "rendered prompt" if sent.rendering is not None else "JSON payload"),
        diff=diff,
        retrievals=tuple(i.content for i in reversed(items) if i.kind is ItemKind.RETRIEVAL),
        recalls=tuple(i.content for i in reversed(items) if i.kind is ItemKind.RECALL),
        divergence_message=divergence)


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
    sent = call.request
    if call.prefix is None or sent is None:
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


def _split(call: ModelCall, items: Sequence[Item]) -> dict[str, list[Mapping[str, Any]]]:
    """The call's messages by segment (tool definitions as the ``tools`` segment)."""
    sent = call.request
    assert sent is not None
    layout = _layout(call, items) or [("messages", "", 0, len(sent.messages))]
    out = {kind: list(sent.messages[start:start + count]) for kind, _, start, count in layout}
    out["tools"] = [dict(t) for t in _tools(sent.params)]
    return out


def _tools(params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tools = params.get("tools")
    return [t for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) else []


def _extra(message: Mapping[str, Any]) -> str:
    rest = {k: v for k, v in message.items() if k not in ("role", "content")}
    return canonical_json(rest) if rest else ""


def _text(content: Any) -> str:
    return content if isinstance(content, str) else canonical_json(content)


def _segment(kind: str, stability: str, start: int, count: int,
             messages: Sequence[Mapping[str, Any]], shared: int, divergence: int | None,
             history_page: int | None) -> ShownSegment:
    first, last, page = start, start + count, None
    if kind in ("history", "messages") and count > HISTORY_PAGE:
        pages = -(-count // HISTORY_PAGE)
        if history_page is None:  # where the reader most likely looks: the break, or the end
            if divergence is not None and start <= divergence < start + count:
                history_page = (divergence - start) // HISTORY_PAGE + 1
            else:
                history_page = pages
        number = min(max(history_page, 1), pages)
        first = start + (number - 1) * HISTORY_PAGE
        last = min(first + HISTORY_PAGE, start + count)
        page = Page(number, pages, first, last - 1)
    shown = tuple(
        ShownMessage(i, str(messages[i].get("role", "")), _text(messages[i].get("content", "")),
                     _extra(messages[i]),
                     "reused" if i < shared else "diverges" if i == divergence else "new")
        for i in range(first, last))
    return ShownSegment(kind, stability, start, count, shown, page)


# -- the raw bytes ----------------------------------------------------------------------------

def raw_bytes(exact: bytes, reused: int, what: str) -> RawBytes:
    """``exact`` split after ``reused`` bytes (moved back to a character boundary, which a
    report measured on characters always is)."""
    cut = max(0, min(reused, len(exact)))
    while 0 < cut < len(exact) and exact[cut] & 0xC0 == 0x80:
        cut -= 1
    return RawBytes(exact[:cut].decode("utf-8"), exact[cut:].decode("utf-8"), cut, len(exact),
                    what)


# -- the diff against the previous call -------------------------------------------------------

def _lines(messages: Sequence[Mapping[str, Any]], offset: int = 0) -> list[str]:
    out = []
    for n, message in enumerate(messages, offset):
        out.append(f"── message {n} · {message.get('role', '')}")
        out.extend(_text(message.get("content", "")).split("\n"))
        extra = _extra(message)
        if extra:
            out.append(extra)
    return out


def segment_diff(old: Mapping[str, Sequence[Mapping[str, Any]]],
                 new: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[SegmentDiff, ...]:
    """Segment by segment, what changed from ``old`` (the previous call's messages by
    segment) to ``new``. Leading messages a segment shares are skipped by count (a long
    history is mostly that), and only what follows is diffed, line by line."""
    kinds = [k for k in (*SEGMENTS, "messages") if k in old or k in new]
    out = []
    for kind in kinds:
        before, after = list(old.get(kind, ())), list(new.get(kind, ()))
        if before == after:
            out.append(SegmentDiff(kind, "same", len(before), len(after), ()))
            continue
        status = "added" if not before else "removed" if not after else "changed"
        keep = common_prefix_len(before, after)
        rows: list[DiffRow] = []
        if keep:
            rows.append(DiffRow("…", f"{keep} message{'s' if keep != 1 else ''} the same"))
        a, b = _lines(before[keep:], keep), _lines(after[keep:], keep)
        if len(a) > MAX_DIFF_LINES or len(b) > MAX_DIFF_LINES:
            rows.append(DiffRow("…", f"{len(a):,} lines before and {len(b):,} after: too many "
                                     "to compare here; the raw bytes below are exact"))
        else:
            rows.extend(_line_diff(a, b))
        out.append(SegmentDiff(kind, status, len(before), len(after), tuple(rows)))
    return tuple(out)


def _line_diff(a: Sequence[str], b: Sequence[str]) -> list[DiffRow]:
    rows = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            same = a[i1:i2]
            if len(same) > 2 * CONTEXT_LINES + 1:
                rows += [DiffRow(" ", line) for line in same[:CONTEXT_LINES]]
                rows.append(DiffRow("…", f"{len(same) - 2 * CONTEXT_LINES} lines the same"))
                rows += [DiffRow(" ", line) for line in same[-CONTEXT_LINES:]]
            else:
                rows += [DiffRow(" ", line) for line in same]
            continue
        rows += [DiffRow("-", line) for line in a[i1:i2]]
        rows += [DiffRow("+", line) for line in b[j1:j2]]
    return rows
