"""The model-call record: what the model was shown, exactly, and what came back.

Every call a turn makes is recorded, failed ones included, with the request as sent (the
provider-shaped messages, and for llama.cpp the rendered prompt and its token ids), the
response, usage, timings, the model id and the call's place in the conversation.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple, TypeVar

from threadline.items import canonical_json, format_time
from threadline.request import HistoryMark, shared_history
from threadline.sequences import Chunked, chunked, common_prefix_len

_S = TypeVar("_S", str, tuple[int, ...])  # a rendering's text, or its token ids


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0

    def to_json(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
                "completion_tokens": self.completion_tokens}


@dataclass(frozen=True)
class Timings:
    ttft_ms: float | None = None  # None when no token arrived
    total_ms: float = 0.0

    def to_json(self) -> dict[str, float | None]:
        ttft = None if self.ttft_ms is None else round(self.ttft_ms, 3)
        return {"ttft_ms": ttft, "total_ms": round(self.total_ms, 3)}


class RenderedPart(NamedTuple):
    """One message's share of a rendered prompt: its text and token ids, and where the part
    ends in the whole prompt (in characters, UTF-8 bytes and tokens)."""

    text: str
    tokens: tuple[int, ...]
    chars_end: int
    bytes_end: int
    tokens_end: int


@dataclass(frozen=True)
class Shared:
    """How much two renderings have in common, from the start."""

    chars: int
    bytes: int
    tokens: int


class Rendering:
    """A rendered prompt and its token ids, in parts that end where messages end.

    A backend that renders message by message builds each request on the previous one's parts,
    sharing the part objects of what did not change, and says so with ``per_message``: part
    ``i`` renders message ``i`` alone, by the backend's model. Two requests known to share
    their first n messages then share their first n parts, and comparing the renderings is a
    scan of what follows; the whole prompt and token list are joined only when someone asks
    for them. Recording the 10,000th turn of a conversation costs what the turn added, not the
    millions of tokens before it.
    """

    __slots__ = ("parts", "has_tokens", "per_message", "_prompt", "_tokens")

    def __init__(self, parts: Sequence[RenderedPart], *, has_tokens: bool = True,
                 per_message: bool = False) -> None:
        self.parts: Chunked[RenderedPart] = chunked(parts)
        self.has_tokens = has_tokens
        self.per_message = per_message
        self._prompt: str | None = None
        self._tokens: tuple[int, ...] | None = None

    @classmethod
    def of(cls, prompt: str, tokens: Sequence[int] | None = None) -> Rendering:
        """A rendering in one part, from a backend that renders the whole prompt at once."""
        return cls.extend((), [(prompt, tuple(tokens or ()))], has_tokens=tokens is not None)

    @classmethod
    def extend(cls, kept: Sequence[RenderedPart], pieces: Iterable[tuple[str, tuple[int, ...]]],
               *, has_tokens: bool = True, per_message: bool = False) -> Rendering:
        """``kept`` (parts of an earlier rendering, from its start) followed by new pieces.
        Parts are shared, not copied (``sequences.Chunked``): extending a rendering of the
        whole history costs what is added."""
        kept = chunked(kept)
        chars, size, count = (kept[-1].chars_end, kept[-1].bytes_end, kept[-1].tokens_end) \
            if kept else (0, 0, 0)
        new = []
        for text, tokens in pieces:
            chars, size, count = chars + len(text), size + _utf8_len(text), count + len(tokens)
            new.append(RenderedPart(text, tokens, chars, size, count))
        return cls(kept.plus(new), has_tokens=has_tokens, per_message=per_message)

    @property
    def prompt(self) -> str:
        if self._prompt is None:
            self._prompt = "".join(part.text for part in self.parts)
        return self._prompt

    @property
    def tokens(self) -> tuple[int, ...] | None:
        if not self.has_tokens:
            return None
        if self._tokens is None:
            self._tokens = tuple(t for part in self.parts for t in part.tokens)
        return self._tokens

    @property
    def chars(self) -> int:
        return self.parts[-1].chars_end if self.parts else 0

    @property
    def n_bytes(self) -> int:
        return self.parts[-1].bytes_end if self.parts else 0

    @property
    def n_tokens(self) -> int | None:
        return (self.parts[-1].tokens_end if self.parts else 0) if self.has_tokens else None

    def shared(self, other: Rendering, known: int = 0) -> Shared:
        """The common prefix of this rendering and ``other``, exact to the character and
        token: whole shared parts first (the first ``known`` are equal by the caller's proof;
        then equal parts, usually the same objects), then a scan of the rest."""
        known = min(known, len(self.parts), len(other.parts))
        # from the start, the parts compare chunk by chunk, skipping the ones both share
        k = known + common_prefix_len(self.parts[known:], other.parts[known:]) if known \
            else common_prefix_len(self.parts, other.parts)
        last = self.parts[k - 1] if k else RenderedPart("", (), 0, 0, 0)
        chars, mine = _tail_prefix(self.parts, other.parts, k, _text_from)
        tokens = 0
        if self.has_tokens and other.has_tokens:
            tokens = last.tokens_end + _tail_prefix(self.parts, other.parts, k,
                                                    _tokens_from)[0]
        return Shared(last.chars_end + chars, last.bytes_end + _utf8_len(mine[:chars]), tokens)

    def prompt_from(self, chars: int) -> str:
        """The prompt from character ``chars`` to the end."""
        i = bisect_right(self.parts, chars, key=lambda part: part.chars_end)
        if i == len(self.parts):
            return ""
        start = self.parts[i].chars_end - len(self.parts[i].text)
        return self.parts[i].text[chars - start:] + _text_from(self.parts, i + 1)

    def tokens_from(self, count: int) -> tuple[int, ...]:
        """The token ids from position ``count`` to the end."""
        i = bisect_right(self.parts, count, key=lambda part: part.tokens_end)
        if i == len(self.parts):
            return ()
        start = self.parts[i].tokens_end - len(self.parts[i].tokens)
        return self.parts[i].tokens[count - start:] + _tokens_from(self.parts, i + 1)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Rendering):
            return NotImplemented
        if self.has_tokens != other.has_tokens or self.chars != other.chars \
                or self.n_tokens != other.n_tokens:
            return False
        shared = self.shared(other)
        return shared.chars == self.chars and shared.tokens == (self.n_tokens or 0)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Rendering({len(self.parts)} parts, {self.chars} chars, {self.n_tokens} tokens)"


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _text_from(parts: Sequence[RenderedPart], start: int, end: int | None = None) -> str:
    return "".join(part.text for part in parts[start:end])


def _tokens_from(parts: Sequence[RenderedPart], start: int, end: int | None = None
                 ) -> tuple[int, ...]:
    return tuple(t for part in parts[start:end] for t in part.tokens)


def _tail_prefix(a: Sequence[RenderedPart], b: Sequence[RenderedPart], start: int,
                 joined: Callable[[Sequence[RenderedPart], int, int | None], _S]
                 ) -> tuple[int, _S]:
    """The common prefix of the text (or tokens, by ``joined``) of ``a`` and ``b`` from part
    ``start``, and ``a``'s joined over the window that decided it. Two renderings that part
    at ``start`` (another conversation's request, say) mostly differ within a part or two, so
    the window starts at one part and doubles only while one side's window is a prefix of the
    other's: the cost is what they share, not the whole of both."""
    width = 1
    while True:
        end = start + width
        mine, theirs = joined(a, start, end), joined(b, start, end)
        common = common_prefix_len(mine, theirs)
        if common < min(len(mine), len(theirs)):
            return common, mine  # they differ inside the window: nothing after can matter
        if common == len(mine) and end >= len(a) or common == len(theirs) and end >= len(b):
            return common, mine  # one side has nothing more: the prefix is all of it
        width *= 2


@dataclass(frozen=True)
class SentRequest:
    """The request exactly as the backend sent it.

    ``messages`` are provider-shaped dicts (a tuple, or a shared sequence of the assembled
    request's own dicts, ``Request.openai_tuple``); ``rendering`` is set by backends that
    render a chat template themselves (llama.cpp): the prompt text and its token ids, so
    reuse can be measured in tokens. ``history`` is the assembled request's
    :class:`HistoryMark`, for backends that send its messages one for one, in order: it lets
    the store and the prefix report confirm a shared history without visiting it
    (``shared_messages``). It is not part of the record: a request read back from the store
    has none.
    """

    model: str
    messages: Sequence[Mapping[str, Any]]
    params: Mapping[str, Any] = field(default_factory=dict)
    rendering: Rendering | None = None
    history: HistoryMark | None = field(default=None, compare=False, repr=False)
    # the payload's size in characters and UTF-8 bytes, once measured: it never changes
    _payload_size: list[int] = field(default_factory=list, init=False, compare=False,
                                     repr=False)

    @property
    def prompt(self) -> str | None:
        return None if self.rendering is None else self.rendering.prompt

    @property
    def tokens(self) -> tuple[int, ...] | None:
        return None if self.rendering is None else self.rendering.tokens

    def exact_bytes(self) -> bytes:
        """The bytes the model consumed: the rendered prompt, or the canonical JSON payload."""
        if self.rendering is not None:
            return self.rendering.prompt.encode("utf-8")
        return self.payload_json().encode("utf-8")

    def payload_json(self) -> str:
        """The canonical JSON payload: model, messages and params."""
        return canonical_json({"model": self.model, "messages": list(self.messages),
                               **self.params})

    def payload_size(self) -> tuple[int, int]:
        """Characters and UTF-8 bytes of :meth:`payload_json`."""
        if not self._payload_size:
            text = self.payload_json()
            self._payload_size[:] = (len(text), _utf8_len(text))
        return self._payload_size[0], self._payload_size[1]

    def payload_shared(self, other: SentRequest, known: int = 0) -> Shared:
        """The common prefix of the two payloads (characters and bytes; tokens 0). With their
        first ``known`` messages equal (the caller's proof) and the same fields before the
        messages, only what follows them is serialised: the earlier messages' length is what
        ``other``'s measured size leaves after its own tail."""
        mine, theirs = self._frame(), other._frame()
        if not known or mine is None or theirs is None or mine[0] != theirs[0]:
            text, old = self.payload_json(), other.payload_json()
            chars = common_prefix_len(old, text)
            return Shared(chars, _utf8_len(text[:chars]), 0)
        new, old = self._after(mine, known), other._after(theirs, known)
        other_chars, other_bytes = other.payload_size()
        lead_chars, lead_bytes = other_chars - len(old), other_bytes - _utf8_len(old)
        if not self._payload_size:
            self._payload_size[:] = (lead_chars + len(new), lead_bytes + _utf8_len(new))
        chars = common_prefix_len(old, new)
        return Shared(lead_chars + chars, lead_bytes + _utf8_len(new[:chars]), 0)

    def _frame(self) -> tuple[str, str] | None:
        """The payload's JSON before its first message and after its last, as canonical JSON
        orders the keys; None where a param is named ``messages`` or not named by text."""
        payload = {"model": self.model, **self.params}
        if "messages" in payload or not all(isinstance(k, str) for k in payload):
            return None
        fields = {k: f"{canonical_json(k)}:{canonical_json(v)}" for k, v in payload.items()}
        head = "".join(fields[k] + "," for k in sorted(fields) if k < "messages")
        tail = "".join("," + fields[k] for k in sorted(fields) if k > "messages")
        return "{" + head + '"messages":[', "]" + tail + "}"

    def _after(self, frame: tuple[str, str], start: int) -> str:
        """The payload's JSON after its first ``start`` messages."""
        rest = ",".join(canonical_json(m) for m in self.messages[start:])
        return ("," if start and rest else "") + rest + frame[1]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "messages": [dict(m) for m in self.messages],
                "params": dict(self.params), "prompt": self.prompt,
                "tokens": None if self.tokens is None else list(self.tokens)}


def known_messages(before: SentRequest, after: SentRequest) -> int:
    """Leading messages the two requests share by their histories' chained hashes
    (``request.shared_history``), and a comparison of the few messages above them; 0 where
    that cannot be shown (no marks, another layout, another view, a rewritten history)."""
    a, b = before.history, after.history
    if a is None or b is None:
        return 0
    end = shared_history(a, b)
    n = len(a.messages)
    if not end or end > len(before.messages) or end > len(after.messages):
        return 0
    # the marks describe these very messages: a backend sends each message's own dict
    if n and (before.messages[end - 1] is not a.messages[-1].to_openai()
              or after.messages[end - 1] is not b.messages[n - 1].to_openai()):
        return 0
    return end if before.messages[:a.start] == after.messages[:a.start] else 0


def shared_messages(before: SentRequest, after: SentRequest, known: int | None = None) -> int:
    """How many leading messages the two requests have in common: what ``known_messages``
    shows (or ``known``, already found by it), then a scan of the rest."""
    known = known_messages(before, after) if known is None else known
    return known + common_prefix_len(before.messages[known:], after.messages[known:])


def shared_rendering(before: SentRequest, after: SentRequest, known: int) -> Shared:
    """The common prefix of two rendered requests whose first ``known`` messages are equal:
    where both render per message, by the same model, that many parts are equal too."""
    assert before.rendering is not None and after.rendering is not None
    parts = known if (before.rendering.per_message and after.rendering.per_message
                      and before.model == after.model) else 0
    return after.rendering.shared(before.rendering, parts)


class CallStatus(StrEnum):
    OK = "ok"
    FAILED = "failed"


@dataclass(frozen=True)
class ModelCall:
    id: str
    conversation_id: str
    branch: str
    turn: int
    head_seq: int        # the last log item the model was shown
    reply_seq: int | None  # the item the reply became (None when the call failed)
    status: CallStatus
    model: str
    request: SentRequest | None  # None in listings; Store.call() loads it
    response: Mapping[str, Any]
    usage: Usage
    timings: Timings
    started_at: datetime
    error: str | None = None
    prefix: Mapping[str, Any] | None = None  # the PrefixReport, as JSON (cache/prefix.py)
    purpose: str = "turn"  # or a side call: "compaction" (constraint extraction)

    @property
    def messages_only(self) -> bool:
        """A failed call whose backend recorded no payload (it failed before building one):
        its request is only the messages it meant to send, in no backend's shape, so no
        other request's rendering or payload compares with it."""
        request = self.request
        return self.status is CallStatus.FAILED and request is not None \
            and request.rendering is None and not request.params

    @property
    def reused_from(self) -> str | None:
        """Where the reused prompt tokens came from, where the backend says: the embedded
        model's ``context``, ``memory`` or ``disk`` (a restored KV snapshot), or ``none``."""
        found = self.response.get("reused_from")
        return None if found is None else str(found)

    def to_json(self, *, with_request: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "call_id": self.id, "conversation_id": self.conversation_id, "branch": self.branch,
            "turn": self.turn, "head_seq": self.head_seq, "reply_seq": self.reply_seq,
            "status": str(self.status), "model": self.model, "usage": self.usage.to_json(),
            "timings": self.timings.to_json(), "started_at": format_time(self.started_at),
            "error": self.error, "response": dict(self.response),
            "prefix": None if self.prefix is None else dict(self.prefix),
            "purpose": self.purpose,
        }
        if with_request and self.request is not None:
            out["request"] = self.request.to_json()
        return out
