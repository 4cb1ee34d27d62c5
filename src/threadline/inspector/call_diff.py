"""A diff of two recorded requests, segment by segment (the call page's "against the previous
call").

Each segment's messages (the tool definitions as the ``tools`` segment) are compared as
lists: a segment that is the same says so and shows nothing; otherwise the leading messages
it shares are counted, not shown (a long history is mostly that), and what follows is diffed
line by line with ``difflib``, unchanged runs folded to a few lines of context.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.items import canonical_json
from threadline.sequences import common_prefix_len

SEGMENTS = ("tools", "system", "pinned", "static", "summary", "history", "tail", "message")
MAX_DIFF_LINES = 6000   # per side: past this a segment's diff is summarised, not computed
CONTEXT_LINES = 3       # unchanged lines kept around each change

Messages = Mapping[str, Sequence[Mapping[str, Any]]]  # a request's messages by segment


@dataclass(frozen=True)
class DiffRow:
    op: str    # " " unchanged, "-" only in the previous call, "+" only in this one, "…" folded
    text: str


@dataclass(frozen=True)
class SegmentDiff:
    kind: str
    status: str                 # "same", "changed", "added", "removed"
    old_count: int
    new_count: int
    rows: tuple[DiffRow, ...]   # empty when the segment is the same


def message_text(content: Any) -> str:
    return content if isinstance(content, str) else canonical_json(content)


def message_extra(message: Mapping[str, Any]) -> str:
    """What a message carries besides its role and content (tool calls, the tool call id),
    as JSON; "" for nothing."""
    rest = {k: v for k, v in message.items() if k not in ("role", "content")}
    return canonical_json(rest) if rest else ""


def segment_diff(old: Messages, new: Messages) -> tuple[SegmentDiff, ...]:
    """Segment by segment, what changed from ``old`` (the previous call's messages) to
    ``new``, in the request's order of segments."""
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
                                     "to compare here; the raw bytes are exact"))
        else:
            rows.extend(_line_diff(a, b))
        out.append(SegmentDiff(kind, status, len(before), len(after), tuple(rows)))
    return tuple(out)


def _lines(messages: Sequence[Mapping[str, Any]], first: int) -> list[str]:
    """The messages as lines, each headed by its place in the segment and its role."""
    out = []
    for n, message in enumerate(messages, first):
        out.append(f"── message {n + 1} of the segment · {message.get('role', '')}")
        out.extend(message_text(message.get("content", "")).split("\n"))
        extra = message_extra(message)
        if extra:
            out.append(extra)
    return out


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
