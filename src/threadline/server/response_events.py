"""The Responses API's shapes: the response object and the server-sent events that stream it,
in the form the official SDK parses (``openai.types.responses``).

A response's one output item is the assistant message holding the reply; its id is derived
from the response id, so a stream, the object it ends with and a later ``GET`` agree on it
(the SDK checks that identities do not change while it accumulates a stream).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from threadline.calls import ModelCall
from threadline.errors import InputError, ThreadlineError
from threadline.items import Item
from threadline.server.streams import error_body, pump
from threadline.turn.result import TurnResult


@dataclass(frozen=True)
class Draft:
    """What a response is before its turn has run: everything the request fixed."""

    id: str
    created_at: datetime
    model: str
    conversation_id: str
    branch: str
    store: bool
    previous_response_id: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def item_id(self) -> str:
        return "msg_" + self.id.removeprefix("resp_")


@dataclass(frozen=True)
class Answer:
    """A finished response: its turn's message, reply and the call that made the reply."""

    message: Item
    reply: Item
    call: ModelCall | None  # None where the call's record is gone (a served reply's source)
    deduplicated: bool = False

    @classmethod
    def of(cls, result: TurnResult) -> Answer:
        return cls(result.message, result.reply, result.call, result.deduplicated)


def response_object(draft: Draft, answer: Answer | None = None, *,
                    error: BaseException | None = None) -> dict[str, Any]:
    """The response object: in progress (no answer yet), completed, or failed."""
    status = "failed" if error is not None else "in_progress" if answer is None else "completed"
    out: dict[str, Any] = {
        "id": draft.id, "object": "response", "created_at": draft.created_at.timestamp(),
        "status": status, "model": draft.model, "output": [], "usage": None,
        "error": None if error is None else _response_error(error),
        "incomplete_details": None, "instructions": draft.instructions,
        "previous_response_id": draft.previous_response_id, "metadata": draft.metadata,
        "store": draft.store, "tools": [], "tool_choice": "none", "parallel_tool_calls": False,
        "text": {"format": {"type": "text"}}, "truncation": "disabled",
        "threadline": {"conversation_id": draft.conversation_id, "branch": draft.branch},
    }
    if error is not None:
        out["threadline"]["error"] = error_body(error)["error"]
    if answer is None:
        return out
    call = answer.call
    out.update(output=[message_item(draft, answer.reply.text)],
               completed_at=answer.reply.created_at.timestamp(),
               usage=None if call is None else _usage(call))
    if call is not None:
        out["model"] = call.model
    out["threadline"] = {
        "conversation_id": answer.reply.conversation_id, "branch": answer.reply.branch,
        "turn": answer.message.turn, "message_seq": answer.message.seq,
        "reply_seq": answer.reply.seq, "call_id": None if call is None else call.id,
        "deduplicated": answer.deduplicated}
    return out


def message_item(draft: Draft, text: str | None) -> dict[str, Any]:
    """The assistant message output item (no text: still streaming, nothing in it yet)."""
    return {"id": draft.item_id, "type": "message", "role": "assistant",
            "status": "in_progress" if text is None else "completed",
            "content": [] if text is None else [_text_part(text)]}


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _usage(call: ModelCall) -> dict[str, Any]:
    usage = call.usage
    return {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens},
            "output_tokens_details": {"reasoning_tokens": 0}}


def _response_error(err: BaseException) -> dict[str, str]:
    code = "invalid_prompt" if isinstance(err, InputError) else "server_error"
    message = err.message if isinstance(err, ThreadlineError) else str(err)
    return {"code": code, "message": message}


def events(run: Callable[[Callable[[str], None]], TurnResult], draft: Draft) -> Iterator[str]:
    """The stream of one response: created, in progress, the message item and its text as it
    is generated, then completed (or failed). ``run`` runs the turn, and keeps its response,
    in its own thread, started before the first event is sent: both finish whether or not
    anyone listens."""
    return _events(pump(run), draft)


def _events(pieces: Iterator[tuple[str, Any]], draft: Draft) -> Iterator[str]:
    numbers = itertools.count()

    def event(kind: str, **fields: Any) -> str:
        body = {"type": kind, "sequence_number": next(numbers), **fields}
        return f"event: {kind}\ndata: {json.dumps(body)}\n\n"

    where = {"item_id": draft.item_id, "output_index": 0}
    opened = streamed = False

    def open_item() -> Iterator[str]:
        yield event("response.output_item.added", output_index=0,
                    item=message_item(draft, None))
        yield event("response.content_part.added", **where, content_index=0,
                    part=_text_part(""))

    shell = response_object(draft)
    yield event("response.created", response=shell)
    yield event("response.in_progress", response=shell)
    for kind, value in pieces:
        if kind == "error":
            yield event("response.failed", response=response_object(draft, error=value))
            return
        if not opened:
            yield from open_item()
            opened = True
        if kind == "delta":
            streamed = True
            yield event("response.output_text.delta", **where, content_index=0, delta=value,
                        logprobs=[])
            continue
        answer = Answer.of(value)
        text = answer.reply.text
        if not streamed:  # a retried request's reply, or one served without the model
            yield event("response.output_text.delta", **where, content_index=0, delta=text,
                        logprobs=[])
        yield event("response.output_text.done", **where, content_index=0, text=text,
                    logprobs=[])
        yield event("response.content_part.done", **where, content_index=0,
                    part=_text_part(text))
        yield event("response.output_item.done", output_index=0,
                    item=message_item(draft, text))
        yield event("response.completed", response=response_object(draft, answer))
