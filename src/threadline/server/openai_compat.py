"""An OpenAI-compatible ``POST /v1/chat/completions`` over durable conversations.

Two ways to use it, and a client need not say which:

- **Stateless clients** (most of them) resend the whole ``messages`` list on every call.
  threadline places the resent history in the log by its transcript hashes
  (``interop/resent.py``): it continues the branch it is the transcript of, forks where it
  departs from one (an edit or a regeneration in the client), or imports it as a new
  conversation; then it runs the turn. The conversation lives on the server, and the
  prefix of each request is the previous one's, so it is cached.
- **Clients that name the conversation** (``metadata.conversation_id``, or the
  ``X-Threadline-Conversation`` header) may send only the new user message. If they send a
  history, it must agree with the conversation's: otherwise 409 with the first differing
  message's index, or a fork with ``X-Threadline-On-Mismatch: fork``.

The conversation and branch come back in the ``X-Threadline-Conversation`` and
``X-Threadline-Branch`` headers and the response's ``threadline`` field, with how the history
was placed. ``Idempotency-Key`` makes a retried request return the first answer. Streaming
uses OpenAI's chunk format, ending in ``data: [DONE]``.
A conversation started with a user's token is that user's, and a resent history is matched
only against that user's conversations; naming another user's is refused (``server/access.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

from fastapi import FastAPI, Header
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict

from threadline.engine import Engine, TurnResult
from threadline.errors import InputError
from threadline.interop.resent import Placement, place, resent_from, settle
from threadline.items import new_id, validate_text
from threadline.server import access
from threadline.server.access import CallerDep
from threadline.server.streams import error_body, pump
from threadline.turn.input import TurnInput

CONVERSATION_HEADER = "X-Threadline-Conversation"
BRANCH_HEADER = "X-Threadline-Branch"


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[Any] | None = None


class ChatCompletionBody(BaseModel):
    model_config = ConfigDict(extra="allow")  # sampling fields are the model's business
    model: str
    messages: list[ChatMessage]
    stream: bool = False
    metadata: dict[str, str] | None = None


def add_chat_completions(app: FastAPI, engine: Engine) -> None:
    store = engine.store

    @app.post("/v1/chat/completions", response_model=None)
    def chat_completions(
            body: ChatCompletionBody,
            caller: CallerDep,
            conversation: str | None = Header(default=None, alias=CONVERSATION_HEADER),
            idempotency_key: str | None = Header(default=None, alias="Idempotency-Key"),
            on_mismatch: Literal["refuse", "fork"] = Header(
                default="refuse", alias="X-Threadline-On-Mismatch"),
    ) -> dict[str, Any] | Response:
        cid = conversation or (body.metadata or {}).get("conversation_id")
        resent = resent_from([_said(n, m) for n, m in enumerate(body.messages)],
                             max_bytes=engine.max_message_bytes)
        validate_text(resent.text, max_bytes=engine.max_message_bytes)
        if cid is not None:
            access.conversation(caller, store, cid)  # 404/403 before anything is written
        access.client_message(caller, store, idempotency_key)
        earlier = None if idempotency_key is None else store.find_client_message(
            idempotency_key)
        if earlier is not None:  # a retried request: the turn it started answers it
            placement = Placement("continued", earlier.conversation_id, earlier.branch)
        else:  # a user's history is looked for among that user's conversations only
            placement = place(store, resent, conversation_id=cid, on_mismatch=on_mismatch,
                              user_id=caller.user_id)
        cid, branch = settle(store, placement, clock=engine.clock)

        def run(on_text: Callable[[str], None] | None) -> TurnResult:
            if placement.how == "answered":  # its message is in the log already
                return engine.answer(TurnInput(conversation_id=cid, branch=branch),
                                     on_text=on_text)
            return engine.run_turn(resent.text, conversation_id=cid, branch=branch,
                                   client_msg_id=idempotency_key, on_text=on_text)

        headers = {CONVERSATION_HEADER: cid, BRANCH_HEADER: branch}
        if not body.stream:
            return JSONResponse(_completion(run(None), placement), headers=headers)
        return StreamingResponse(_chunks(run, engine.model.model_id, placement),
                                 media_type="text/event-stream",
                                 headers={**headers, "Cache-Control": "no-cache"})


def _said(index: int, message: ChatMessage) -> tuple[str, str]:
    if message.role == "assistant" and (message.model_extra or {}).get("tool_calls"):
        raise InputError(f"message {index} is an assistant message with tool calls; "
                         "threadline runs tools on the server",
                         hint="resend only what the user and the assistant said")
    return message.role, _text(message)


def _text(message: ChatMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    parts = message.content or []
    texts = [p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    if len(texts) != len(parts) or not all(isinstance(t, str) for t in texts):
        raise InputError("only text content is supported (parts of type 'text')")
    return "\n".join(str(t) for t in texts)


def _completion(result: TurnResult, placement: Placement) -> dict[str, Any]:
    call = result.call
    usage = call.usage
    return {
        "id": f"chatcmpl-{call.id}", "object": "chat.completion",
        "created": int(call.started_at.timestamp()), "model": call.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.reply.text},
                     "finish_reason": call.response.get("finish_reason", "stop")}],
        "usage": {"prompt_tokens": usage.prompt_tokens,
                  "completion_tokens": usage.completion_tokens,
                  "total_tokens": usage.prompt_tokens + usage.completion_tokens,
                  "prompt_tokens_details": {"cached_tokens": usage.cached_tokens}},
        "threadline": {"conversation_id": result.conversation_id, "branch": result.branch,
                       "turn": result.turn, "call_id": call.id,
                       "deduplicated": result.deduplicated, "history": placement.to_json()},
    }


def _chunks(run: Callable[[Callable[[str], None]], TurnResult], model_id: str,
            placement: Placement) -> Iterator[str]:
    stream_id, created = f"chatcmpl-{new_id('')}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {"id": stream_id, "object": "chat.completion.chunk", "created": created,
                "model": model_id, "choices": [{"index": 0, "delta": delta,
                                                "finish_reason": finish}], **extra}
        return f"data: {json.dumps(body)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for kind, value in pump(run):
        if kind == "delta":
            yield chunk({"content": value})
        elif kind == "done":
            result = _completion(value, placement)
            yield chunk({}, result["choices"][0]["finish_reason"], usage=result["usage"],
                        threadline=result["threadline"])
        else:
            yield f"data: {json.dumps(error_body(value))}\n\n"
    yield "data: [DONE]\n\n"
