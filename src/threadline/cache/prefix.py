"""Prefix reuse between consecutive requests, and why it stopped where it did.

Every recorded call gets a :class:`PrefixReport` against the previous call on its branch: the
longest common prefix in messages, bytes, tokens and full token blocks (parent-chained block
hashes, as vLLM's prefix cache keys them), the theoretical best (all of the previous request),
and where the two diverged: position, segment, item and field, with an attributed cause.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from threadline.request import Request

BLOCK_SIZE = 16  # tokens per KV block, vLLM's default


def block_hashes(tokens: Sequence[int], block_size: int = BLOCK_SIZE,
                 salt: str = "") -> list[str]:
    """Hashes of the full blocks of ``tokens``, each chained to the one before (a partial last
    block has none: only full blocks are cacheable). ``salt`` isolates tenants."""
    out: list[str] = []
    parent = hashlib.blake2b(salt.encode("utf-8"), digest_size=16).hexdigest()
    for start in range(0, len(tokens) - block_size + 1, block_size):
        block = ",".join(map(str, tokens[start : start + block_size]))
        parent = hashlib.blake2b(f"{parent}|{block}".encode(), digest_size=16).hexdigest()
        out.append(parent)
    return out


class Cause(StrEnum):
    FIRST_CALL = "first_call"              # nothing to compare with
    APPEND_ONLY = "append_only"            # the previous request is a prefix: the best case
    FORK = "fork"                          # first call on a branch, against another branch
    MODEL_CHANGED = "model_changed"
    TOOLS_CHANGED = "tools_changed"
    TOOLS_REORDERED = "tools_reordered"
    SYSTEM_CHANGED = "system_changed"
    VOLATILE_VALUE = "volatile_value_above_tail"  # a timestamp, id or counter above the history
    HISTORY_REWRITTEN = "history_rewritten"
    COMPACTION_RESET = "compaction_reset"  # expected: a deliberate, recorded reset
    TAIL_REPLACED = "tail_replaced"        # only the previous turn's volatile tail differs
    TEMPLATE_CHANGED = "template_changed"  # same messages, different rendering


EXPECTED = {Cause.FIRST_CALL, Cause.APPEND_ONLY, Cause.COMPACTION_RESET, Cause.TAIL_REPLACED,
            Cause.FORK}

# what a per-request value looks like, tried in order on the word where two requests differ
_VOLATILE = [
    ("a timestamp", re.compile(r"\d{4}-\d{2}-\d{2}[T ]?\d{1,2}:\d{2}.*|\d{1,2}:\d{2}(:\d{2})?"
                               r"(\.\d+)?Z?|\d{10}(\d{3})?")),
    ("a date", re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}")),
    ("a request id", re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]{12,}|"
                                r"(req|request|trace|session|msg)[_-]?[A-Za-z0-9]{6,}", re.I)),
    ("a counter", re.compile(r"#?\d+")),
]
_WORD = re.compile(r"[A-Za-z0-9:._#-]")


def word_at(text: str, at: int) -> str:
    """The word (letters, digits and ``:._#-``) containing position ``at``."""
    start = at
    while start > 0 and _WORD.match(text[start - 1]):
        start -= 1
    end = at
    while end < len(text) and _WORD.match(text[end]):
        end += 1
    return text[start:end].strip(".:-")


def looks_volatile(before: str, after: str, at: int) -> str | None:
    """What the words where ``before`` and ``after`` first differ (at ``at``) look like, if
    both look like the same kind of per-request value: a timestamp, a date, an id, a counter."""
    old, new = word_at(before, at), word_at(after, at)
    for name, pattern in _VOLATILE:
        if old and new and pattern.fullmatch(old) and pattern.fullmatch(new):
            return name
    return None


@dataclass(frozen=True)
class Divergence:
    message: int          # index of the first message that differs (in the current request)
    byte: int             # offset in the exact request bytes
    token: int | None
    segment: str | None   # the segment the current request diverges in
    seq: int | None       # the log item that message came from
    field: str            # content | role | tool_calls | messages | tools | rendering

    def to_json(self) -> dict[str, Any]:
        return {"message": self.message, "byte": self.byte, "token": self.token,
                "segment": self.segment, "seq": self.seq, "field": self.field}


class PrefixCounts(Protocol):
    """What pricing reads of a prefix report: a ``PrefixReport``, or the audit export's typed
    decoding of a stored one (``stores/audit_json.py``)."""

    @property
    def prompt_bytes(self) -> int: ...
    @property
    def reused_bytes(self) -> int: ...
    @property
    def prompt_tokens(self) -> int | None: ...
    @property
    def reused_tokens(self) -> int | None: ...


def reuse_ratio(report: PrefixCounts) -> float:
    """Reused ÷ sent, in tokens where known."""
    if report.prompt_tokens and report.reused_tokens is not None:
        return report.reused_tokens / report.prompt_tokens
    return report.reused_bytes / report.prompt_bytes if report.prompt_bytes else 0.0


@dataclass(frozen=True)
class PrefixReport:
    previous_call_id: str | None
    prompt_bytes: int
    reused_bytes: int
    previous_bytes: int
    prompt_tokens: int | None
    reused_tokens: int | None
    previous_tokens: int | None
    reused_blocks: int | None
    prompt_blocks: int | None
    cause: Cause
    detail: str
    divergence: Divergence | None
    layout: tuple[tuple[str, str, int, int], ...]  # (segment, stability, first msg, count)
    compaction_seq: int | None = None  # the newest compaction event the request went through
    # where the backend found the tokens it reused (the embedded model: its context, or a KV
    # snapshot restored from memory or disk), and how long restoring them took
    reused_from: str | None = None
    restore_ms: float | None = None

    @property
    def ratio(self) -> float:
        """Reused ÷ sent, in tokens where known."""
        return reuse_ratio(self)

    @property
    def best_ratio(self) -> float:
        """The most an append-only history could reuse: all of the previous request."""
        if self.prompt_tokens and self.previous_tokens is not None:
            return min(self.previous_tokens, self.prompt_tokens) / self.prompt_tokens
        return min(self.previous_bytes, self.prompt_bytes) / self.prompt_bytes \
            if self.prompt_bytes else 0.0

    @property
    def expected(self) -> bool:
        return self.cause in EXPECTED

    def to_json(self) -> dict[str, Any]:
        out = {"previous_call_id": self.previous_call_id, "prompt_bytes": self.prompt_bytes,
                "reused_bytes": self.reused_bytes, "previous_bytes": self.previous_bytes,
                "prompt_tokens": self.prompt_tokens, "reused_tokens": self.reused_tokens,
                "previous_tokens": self.previous_tokens, "reused_blocks": self.reused_blocks,
                "prompt_blocks": self.prompt_blocks, "block_size": BLOCK_SIZE,
                "ratio": round(self.ratio, 6), "best_ratio": round(self.best_ratio, 6),
                "cause": str(self.cause), "expected": self.expected, "detail": self.detail,
                "divergence": None if self.divergence is None else self.divergence.to_json(),
                "layout": [{"segment": s, "stability": st, "start": i, "count": n}
                           for s, st, i, n in self.layout],
                "compaction_seq": self.compaction_seq}
        if self.reused_from is not None:
            out.update(reused_from=self.reused_from, restore_ms=self.restore_ms)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PrefixReport:
        d = data.get("divergence")
        return cls(
            previous_call_id=data["previous_call_id"], prompt_bytes=data["prompt_bytes"],
            reused_bytes=data["reused_bytes"], previous_bytes=data["previous_bytes"],
            prompt_tokens=data["prompt_tokens"], reused_tokens=data["reused_tokens"],
            previous_tokens=data["previous_tokens"], reused_blocks=data["reused_blocks"],
            prompt_blocks=data["prompt_blocks"], cause=Cause(data["cause"]),
            detail=data["detail"],
            divergence=None if d is None else Divergence(**d),
            layout=tuple((x["segment"], x["stability"], x["start"], x["count"])
                         for x in data["layout"]),
            compaction_seq=data.get("compaction_seq"), reused_from=data.get("reused_from"),
            restore_ms=data.get("restore_ms"))


def layout_of(request: Request) -> tuple[tuple[str, str, int, int], ...]:
    out, start = [], 0
    for segment in request.segments:
        out.append((str(segment.kind), str(segment.stability), start, len(segment.messages)))
        start += len(segment.messages)
    return tuple(out)
