"""The ModelBackend protocol: one method, streaming through a callback.

A backend renders the provider-neutral :class:`~threadline.request.Request` into what its model
consumes, calls it, and reports exactly what it sent (:class:`~threadline.calls.SentRequest`)
with usage and timings. ``on_text`` receives text as it streams; if it raises, generation stops
and the exception propagates (that is how a caller cancels).

A backend also says what compaction plans with: ``count_tokens`` (exact where it has the
model's tokenizer, else :func:`estimate_tokens`) and ``context_window`` (None where it cannot
know, and then nothing compacts on its own).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from threadline.calls import SentRequest, Timings, Usage
from threadline.request import Request

_T = TypeVar("_T")

OnText = Callable[[str], None]
_PIECES = re.compile(r"\w+|[^\w\s]|\s+")


def estimate_tokens(text: str) -> int:
    """A tokenizer-free stand-in: words, punctuation marks and runs of whitespace."""
    return len(_PIECES.findall(text))


@dataclass(frozen=True)
class RequestedCall:
    """A tool call the model asked for: its arguments parsed, or the raw text when they were
    not a JSON object (the harness answers that with an error the model can act on)."""

    id: str
    name: str
    arguments: Mapping[str, Any] | str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Completion:
    text: str
    sent: SentRequest
    usage: Usage
    timings: Timings
    finish_reason: str  # "stop": ended its turn; "length": max_tokens; "tool_calls"
    extra: Mapping[str, Any] = field(default_factory=dict)  # backend-specific, recorded as-is
    tool_calls: tuple[RequestedCall, ...] = ()  # in the order the model asked for them
    # where the cached prompt tokens came from, where the backend can tell: "context" (what
    # it had evaluated last), "memory" or "disk" (a restored KV snapshot), "none"
    reused_from: str | None = None
    restore_ms: float | None = None  # restoring them, when they were restored

    def response_json(self) -> dict[str, Any]:
        out = {"text": self.text, "finish_reason": self.finish_reason, **self.extra}
        if self.reused_from is not None:
            out.update(reused_from=self.reused_from, restore_ms=self.restore_ms)
        if self.tool_calls:
            out["tool_calls"] = [call.to_json() for call in self.tool_calls]
        return out


class ModelBackend(Protocol):
    model_id: str
    context_window: int | None  # tokens a request and its reply may take together

    def count_tokens(self, text: str) -> int: ...

    def complete(self, request: Request, *, on_text: OnText | None = None) -> Completion: ...


class Stopwatch:
    """Time to first token and total time of one call."""

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._first: float | None = None

    def first_token(self) -> None:
        if self._first is None:
            self._first = time.perf_counter()

    def timings(self) -> Timings:
        now = time.perf_counter()
        ttft = None if self._first is None else (self._first - self._start) * 1000
        return Timings(ttft_ms=ttft, total_ms=(now - self._start) * 1000)


def closed_while_idle(err: BaseException) -> bool:
    """An SDK's connection error that is a kept-alive connection the server had already
    closed: it "disconnected without sending a response", so the request was never answered
    and sending it once more, on a new connection, is what any HTTP client would do. (The
    SDKs' own retries are off: threadline records every call as it went.)"""
    cause: BaseException | None = err
    while cause is not None:
        if type(cause).__name__ == "RemoteProtocolError" and \
                "without sending a response" in str(cause):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def sent_again_if_closed(call: Callable[[], _T], connection_error: type[Exception]) -> _T:
    """``call()``, and once more if its connection turns out to have been closed while idle
    (``closed_while_idle``); any other connection error is raised."""
    try:
        return call()
    except connection_error as err:
        if not closed_while_idle(err):
            raise
        return call()
