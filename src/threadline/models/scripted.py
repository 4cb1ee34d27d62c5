"""A deterministic model for tests, demos and dry runs.

It replies from a queue (``enqueue``), or else with a fixed rule, streams word by word, can be
told to fail, and keeps a token-level prefix cache the way llama.cpp does, so prefix reuse is
observable without a real model. Its "tokens" are words, punctuation marks and runs of
whitespace, over a ChatML rendering of the request.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from operator import attrgetter
from typing import Any, NamedTuple

from threadline.calls import RenderedPart, Rendering, SentRequest, Usage
from threadline.items import new_id
from threadline.models.base import Completion, OnText, RequestedCall, Stopwatch
from threadline.request import HistoryMark, Message, Request, shared_history
from threadline.sequences import Chunked, common_prefix_len

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]|\s+")
_GENERATION_PROMPT = "<|im_start|>assistant\n"


@lru_cache(maxsize=65_536)
def scripted_tokens(text: str) -> tuple[str, ...]:
    return tuple(TOKEN_PATTERN.findall(text))


@lru_cache(maxsize=65_536)
def token_id(token: str) -> int:
    """A stable id for a scripted token, so requests record token ids like a real model's."""
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest(), "big")


def _render(message: Message) -> str:
    return f"<|im_start|>{message.role}\n{message.content}<|im_end|>\n"


def render_chatml(request: Request) -> str:
    """A ChatML rendering, so the scripted prompt grows the way a real template's does."""
    return "".join(_render(m) for m in request.messages) + _GENERATION_PROMPT


@lru_cache(maxsize=65_536)
def _piece(text: str) -> tuple[str, tuple[int, ...]]:
    """A message's rendering and its token ids, kept: a request that finds no recent
    rendering of its conversation to build on (more than ``RENDERINGS_KEPT`` conversations
    taking turns) renders its whole history again, at a lookup a message."""
    return text, tuple(map(token_id, scripted_tokens(text)))


def scripted_rendering(messages: Sequence[Message]) -> Rendering:
    """The rendering :class:`ScriptedModel` records for ``messages``, built from nothing: a
    part per message, then the generation prompt (what ``threadline replay`` compares)."""
    return Rendering.extend((), [*map(_piece, map(_render, messages)),
                                 _piece(_GENERATION_PROMPT)], per_message=True)


@dataclass(frozen=True)
class ToolCalls:
    """A scripted reply that asks for tools: (name, arguments) pairs, arguments as a mapping or
    as raw text (to script malformed JSON), with optional text alongside. Ids are assigned as
    a provider would, unique per call."""

    calls: tuple[tuple[str, Mapping[str, Any] | str], ...]
    text: str = ""

    @classmethod
    def of(cls, *calls: tuple[str, Mapping[str, Any] | str], text: str = "") -> ToolCalls:
        return cls(tuple(calls), text)


Reply = str | ToolCalls | BaseException


def echo_reply(request: Request, *, users: int | None = None) -> str:
    """Counts the request's user messages (``users``: already counted) and echoes the
    last."""
    messages = request.messages
    if users is None:
        users = list(map(attrgetter("role"), messages)).count("user")
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    return f"(scripted reply {users}) You said: {' '.join(last.split())[:200]}"


RENDERINGS_KEPT = 16  # recent requests' renderings, to render the next of each on
REQUESTS_KEPT = 1_000  # the requests kept for tests to read: a demo server must not grow


class _Rendered(NamedTuple):
    messages: Sequence[Message]
    parts: Chunked[RenderedPart]
    users: Chunked[int]  # the user messages up to each message
    mark: HistoryMark | None  # where the request's history sits, from the assembler


def _shared(kept: _Rendered, messages: Sequence[Message], mark: HistoryMark | None) -> int:
    """The leading messages ``kept``'s request shares with this one: the history both show
    of the same log, by its chained hashes, with the few messages above it compared, then
    what follows; or, without marks, a comparison from the start."""
    end = 0 if kept.mark is None or mark is None else shared_history(kept.mark, mark)
    above = 0 if mark is None else mark.start
    if end and common_prefix_len(kept.messages[:above], messages[:above]) == above:
        return end + common_prefix_len(kept.messages[end:], messages[end:])
    return common_prefix_len(kept.messages, messages)


def _same_log(kept: HistoryMark | None, mark: HistoryMark | None) -> bool:
    """Whether both requests show a history of the same conversation (so their chained hashes
    can prove what they share)."""
    return kept is not None and mark is not None and kept.conversation_id == mark.conversation_id


def _leads(before: Sequence[Message], after: Sequence[Message]) -> bool:
    """Whether ``after`` may continue ``before``: its message where ``before`` ends is the
    same (one comparison; ``common_prefix_len`` then confirms the rest)."""
    n = len(before)
    return 0 < n <= len(after) and before[n - 1] == after[n - 1]


class ScriptedModel:
    model_id = "scripted"

    def __init__(self, replies: Iterable[Reply] = (), *,
                 default: Callable[[Request], str | ToolCalls] = echo_reply,
                 first_token_delay_s: float = 0.0, token_delay_s: float = 0.0,
                 context_window: int | None = None) -> None:
        self.context_window = context_window
        self._queue: deque[Reply] = deque(replies)
        self._default = default
        self.first_token_delay_s = first_token_delay_s
        self.token_delay_s = token_delay_s
        # what the "KV cache" holds: the last prompt and the reply's token ids
        self._evaluated: tuple[Rendering, tuple[int, ...]] | None = None
        # recent requests' messages, their parts, and user messages up to each, newest first
        self._rendered: deque[_Rendered] = deque(maxlen=RENDERINGS_KEPT)
        self.requests: list[Request] = []  # the last REQUESTS_KEPT, oldest first

    def count_tokens(self, text: str) -> int:
        return len(scripted_tokens(text))

    def enqueue(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    def complete(self, request: Request, *, on_text: OnText | None = None) -> Completion:
        watch = Stopwatch()
        self.requests.append(request)
        if len(self.requests) > REQUESTS_KEPT:
            del self.requests[0]
        rendering = self._render(request.messages, request.history)
        sent = SentRequest(model=self.model_id, messages=request.openai_tuple(),
                           rendering=rendering, history=request.history)
        reply = self._queue.popleft() if self._queue else self._reply(request)
        if isinstance(reply, BaseException):
            self._evaluated = None
            raise reply
        calls: tuple[RequestedCall, ...] = ()
        if isinstance(reply, ToolCalls):
            if request.tool_choice == "none":  # told to answer in text: it does
                reply = echo_reply(request, users=self._users())
            else:
                calls = tuple(RequestedCall(new_id("call_"), name, arguments)
                              for name, arguments in reply.calls)
                reply = reply.text
        cached = min(self._cached(rendering), max((rendering.n_tokens or 0) - 1, 0))
        if self.first_token_delay_s:  # sleep(0) still gives up the GIL: not for nothing
            time.sleep(self.first_token_delay_s)
        pieces = scripted_tokens(reply)
        for piece in pieces:
            watch.first_token()
            if on_text is not None:
                on_text(piece)
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
        self._evaluated = (rendering, tuple(map(token_id, pieces)))
        usage = Usage(prompt_tokens=rendering.n_tokens or 0, cached_tokens=cached,
                      completion_tokens=len(pieces))
        return Completion(text=reply, sent=sent, usage=usage, timings=watch.timings(),
                          finish_reason="tool_calls" if calls else "stop", tool_calls=calls)

    def _reply(self, request: Request) -> str | ToolCalls:
        if self._default is echo_reply:
            return echo_reply(request, users=self._users())
        return self._default(request)

    def _users(self) -> int:
        """The user messages of the request just rendered."""
        counts = self._rendered[0].users if self._rendered else ()
        return counts[-1] if counts else 0

    def _render(self, messages: Sequence[Message], mark: HistoryMark | None) -> Rendering:
        """ChatML, message by message, on top of the parts of the recent request that shares
        the most leading messages with this one (the previous turn of its conversation, where
        conversations take turns): the messages they share keep their rendered parts (the
        same objects). Part ``i`` renders message ``i`` alone (``per_message``); the last part
        is the generation prompt. Both the messages and the parts are shared sequences
        (``sequences.Chunked``): what the two requests share is skipped, not visited, and
        where both carry the assembler's history mark, the history they share is confirmed
        by its chained hashes (``request.shared_history``), not message by message."""
        # its conversation's previous request, picked out by its last message (in the same
        # place here) and tried first, else whichever shares the most (compared in full: a
        # few, and rarely)
        candidates = [k for k in self._rendered if _leads(k.messages, messages)] or \
            self._rendered
        base, keep = _Rendered((), Chunked(), Chunked(), None), 0
        for kept in sorted(candidates, key=lambda k: not _same_log(k.mark, mark)):
            shared = _shared(kept, messages, mark)
            if shared > keep:
                base, keep = kept, shared
                if keep == len(kept.messages) and _same_log(kept.mark, mark):
                    break  # its own conversation's previous request, extended: another's
                    # (conversations of the same texts) would be compared message by message
        if keep and keep == len(base.messages) and (mark is None or _same_log(base.mark, mark)):
            # its conversation's next request: it supersedes the one it extends (found by
            # identity: == would compare histories). Another conversation's request of the
            # same texts stays, for that conversation's next turn to find by its hashes.
            del self._rendered[next(i for i, k in enumerate(self._rendered) if k is base)]
        new = messages[keep:]
        rendering = Rendering.extend(base.parts.prefix(keep), map(_piece, map(_render, new)))
        users = base.users.prefix(keep)
        counted = accumulate((int(m.role == "user") for m in new),
                             initial=users[-1] if users else 0)
        next(counted)  # the initial count, already in ``users``
        self._rendered.appendleft(_Rendered(messages, rendering.parts, users.plus(counted),
                                            mark))
        return Rendering.extend(rendering.parts, [_piece(_GENERATION_PROMPT)],
                                per_message=True)

    def _cached(self, rendering: Rendering) -> int:
        """Prompt tokens the previous call left in the "KV cache" (its prompt and reply), as
        llama.cpp would reuse them."""
        if self._evaluated is None:
            return 0
        before, reply = self._evaluated
        shared = rendering.shared(before).tokens
        if shared < (before.n_tokens or 0):
            return shared
        return shared + common_prefix_len(reply, rendering.tokens_from(shared))
