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

from threadline.cache.prefix import common_prefix_len
from threadline.calls import SentRequest
from threadline.errors import StoreError

_FIELDS = ("messages", "prompt", "tokens")


def _field(request: SentRequest, name: str) -> str | tuple[Any, ...] | None:
    value = getattr(request, name)
    return value if value is None or isinstance(value, str | tuple) else tuple(value)


def encode(request: SentRequest, base: SentRequest | None) -> dict[str, Any]:
    """The delta that rebuilds ``request`` from ``base`` (or from nothing)."""
    delta: dict[str, Any] = {"model": request.model, "params": dict(request.params)}
    for name in _FIELDS:
        value = _field(request, name)
        if value is None:
            delta[name] = None
            continue
        previous = None if base is None else _field(base, name)
        keep = 0 if previous is None or type(previous) is not type(value) else \
            common_prefix_len(previous, value)
        delta[name] = {"keep": keep, "tail": value[keep:]}
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
    return SentRequest(
        model=target["model"],
        params=target["params"],
        messages=tuple(values["messages"] or ()),
        prompt=values["prompt"],
        tokens=None if values["tokens"] is None else tuple(values["tokens"]),
    )
