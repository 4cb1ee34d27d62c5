"""Whole request fields of many calls of one conversation, rebuilt from their stored deltas
(``stores/delta.py``) in call order, each decoded only as far as asked.

Each call's delta is applied to its base's whole field, kept from the call before, instead of
walking the chain back to its root: rebuilding every request of a conversation costs the
requests' size, not the square of the chain's length. A field is decoded only when asked: a
rendered request's exact bytes are its prompt, so neither its messages nor its token ids (most
of a stored delta) are parsed, and the prompt part is decoded by msgspec (the ``audit`` extra),
as only an export reads these.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import msgspec

from threadline.errors import StoreError


class _PromptPart(msgspec.Struct, forbid_unknown_fields=True):
    keep: int  # msgspec's int is never a bool
    tail: str


_prompt = msgspec.json.Decoder(_PromptPart)
_KEEP_WHOLE = 8  # a call's base is almost always one of the few calls just before it
_TOKENS_KEY = ',"tokens":'
_PROMPT_KEY = ',"prompt":'


class DeltaFields:
    def __init__(self, deltas: Mapping[str, tuple[str | None, str]]) -> None:
        """``deltas``: each call's base call id and stored delta (canonical JSON), by id."""
        self._deltas = deltas
        self._decoded: dict[str, dict[str, Any]] = {}
        self._prompts: dict[str, dict[str, Any] | None] = {}
        self._whole: dict[str, OrderedDict[str, Any]] = {}

    def delta(self, call_id: str) -> dict[str, Any]:
        """The call's whole delta, decoded."""
        found = self._decoded.get(call_id)
        if found is None:
            found = self._decoded[call_id] = json.loads(self._deltas[call_id][1])
        return found

    def whole(self, call_id: str, name: str) -> Any:
        """The call's whole ``name`` field ("messages", "prompt" or "tokens"): None where the
        request has none."""
        kept = self._whole.setdefault(name, OrderedDict())
        chain: list[str] = []
        current: str | None = call_id
        while current is not None and current not in kept:
            chain.append(current)
            current = self._deltas[current][0]
        value = None if current is None else kept[current]
        for step in reversed(chain):
            value = _apply(value, self._part(step, name))
            kept[step] = value
            while len(kept) > _KEEP_WHOLE:
                kept.popitem(last=False)
        return value

    def _part(self, call_id: str, name: str) -> dict[str, Any] | None:
        if name != "prompt" or call_id in self._decoded:
            part: dict[str, Any] | None = self.delta(call_id)[name]
            return part
        if call_id not in self._prompts:
            self._prompts[call_id] = _prompt_part(self._deltas[call_id][1]) or \
                self.delta(call_id)["prompt"]
        return self._prompts[call_id]


def _prompt_part(text: str) -> dict[str, Any] | None:
    """The delta's prompt part, parsed alone; None where that cannot be done (the caller then
    parses the whole delta). Canonical JSON sorts the keys, so "prompt" and "tokens" are the
    last two; a token tail is only numbers, and the prompt part a number and a string, inside
    which a quote is always escaped: so the last ``,"tokens":`` is the top-level key, and the
    last ``,"prompt":`` before it too. That key ends at or before the text's last quote, which
    a search for one character finds fast, so the token ids after it are not searched."""
    tokens_at = text.rfind(_TOKENS_KEY, 0, text.rfind('"') + 2)
    prompt_at = text.rfind(_PROMPT_KEY, 0, tokens_at) if tokens_at > 0 else -1
    if prompt_at < 0:
        return None
    try:
        part = _prompt.decode(text[prompt_at + len(_PROMPT_KEY):tokens_at])
    except msgspec.MsgspecError:
        return None
    return {"keep": part.keep, "tail": part.tail}


def _apply(base: Any, part: Mapping[str, Any] | None) -> Any:
    if part is None:
        return None
    keep, tail = part["keep"], part["tail"]
    if keep and (base is None or len(base) < keep):
        raise StoreError("a stored request refers to a base request that is missing; the "
                         "call log is damaged")
    return tail if not keep else base[:keep] + tail
