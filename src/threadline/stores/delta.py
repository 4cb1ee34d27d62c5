"""Exact requests, stored as deltas against the previous call's request.

Turn n re-sends turns 1..n-1, so storing every request whole makes the log quadratic in the
length of the conversation. Each recorded request is instead stored as, per field, how much of
the base request it keeps and the tail it adds; decoding walks the chain of bases back until
nothing more is needed. An append-only conversation therefore costs only its new bytes per
call, and the exact request of any call can still be rebuilt byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threadline.calls import (
    Rendering,
    SentRequest,
    Shared,
    known_messages,
    shared_messages,
    shared_rendering,
)
from threadline.errors import StoreError

_FIELDS = ("messages", "prompt", "tokens")


def encode(request: SentRequest, base: SentRequest | None) -> dict[str, Any]:
    """The delta that rebuilds ``request`` from ``base`` (or from nothing). Where both carry
    the assembler's history mark, the history they share is confirmed by its chained hashes
    (``calls.known_messages``) and only what follows it is compared: the cost of a turn does
    not grow with the conversation. Either way the delta is exact."""
    known = 0 if base is None else known_messages(base, request)
    keep = 0 if base is None else shared_messages(base, request, known)
    delta: dict[str, Any] = {"model": request.model, "params": dict(request.params),
                             "messages": {"keep": keep, "tail": request.messages[keep:]},
                             "prompt": None, "tokens": None}
    rendering = request.rendering
    if rendering is None:
        return delta
    shared = Shared(0, 0, 0)
    if base is not None and base.rendering is not None:
        shared = shared_rendering(base, request, known)
    delta["prompt"] = {"keep": shared.chars, "tail": rendering.prompt_from(shared.chars)}
    if rendering.has_tokens:
        delta["tokens"] = {"keep": shared.tokens, "tail": rendering.tokens_from(shared.tokens)}
    return delta


def _rebuild(parts: Sequence[Mapping[str, Any] | None]) -> str | list[Any]:
    pieces: list[Any] = []
    need: int | None = None  # how much of the current level's full value is still needed
    for part in parts:
        if part is None:
            break
        keep, tail = part["keep"], part["tail"]
        pieces.append(tail if need is None else tail[: max(0, need - keep)])
        need = keep if need is None else min(need, keep)
        if need == 0:
            break
    if need:
        raise StoreError("a stored request refers to a base request that is missing; "
                         "the call log is damaged")
    if isinstance(pieces[0], str):
        return "".join(reversed(pieces))
    return [x for piece in reversed(pieces) for x in piece]


def decode(chain: Sequence[Mapping[str, Any]]) -> SentRequest:
    """Rebuild a request from its delta followed by its bases' deltas, newest first."""
    target = chain[0]
    values: dict[str, Any] = {
        name: None if target[name] is None else _rebuild([d[name] for d in chain])
        for name in _FIELDS}
    prompt, tokens = values["prompt"], values["tokens"]
    return SentRequest(
        model=target["model"],
        params=target["params"],
        messages=tuple(values["messages"] or ()),
        rendering=None if prompt is None else Rendering.of(prompt, tokens),
    )
