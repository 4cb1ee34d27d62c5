"""The model-call record: what the model was shown, exactly, and what came back.

Every call a turn makes is recorded, failed ones included, with the request as sent (the
provider-shaped messages, and for llama.cpp the rendered prompt and its token ids), the
response, usage, timings, the model id and the call's place in the conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from threadline.items import canonical_json, format_time


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


@dataclass(frozen=True)
class SentRequest:
    """The request exactly as the backend sent it.

    ``messages`` are provider-shaped dicts; ``prompt`` and ``tokens`` are set by backends that
    render a chat template themselves (llama.cpp), so reuse can be measured in tokens.
    """

    model: str
    messages: tuple[Mapping[str, Any], ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    prompt: str | None = None
    tokens: tuple[int, ...] | None = None

    def exact_bytes(self) -> bytes:
        """The bytes the model consumed: the rendered prompt, or the canonical JSON payload."""
        if self.prompt is not None:
            return self.prompt.encode("utf-8")
        payload = {"model": self.model, "messages": list(self.messages), **self.params}
        return canonical_json(payload).encode("utf-8")

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "messages": [dict(m) for m in self.messages],
                "params": dict(self.params), "prompt": self.prompt,
                "tokens": None if self.tokens is None else list(self.tokens)}


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

    def to_json(self, *, with_request: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "call_id": self.id, "conversation_id": self.conversation_id, "branch": self.branch,
            "turn": self.turn, "head_seq": self.head_seq, "reply_seq": self.reply_seq,
            "status": str(self.status), "model": self.model, "usage": self.usage.to_json(),
            "timings": self.timings.to_json(), "started_at": format_time(self.started_at),
            "error": self.error, "response": dict(self.response),
            "prefix": None if self.prefix is None else dict(self.prefix),
        }
        if with_request and self.request is not None:
            out["request"] = self.request.to_json()
        return out
