"""An OpenAI-compatible ``POST /v1/chat/completions`` where the server owns the history.

An existing OpenAI client keeps working, but stops re-sending the conversation: it names the
conversation (``metadata.conversation_id``, or the ``X-Threadline-Conversation`` header) and
sends only the new user message; threadline appends it to the durable log, assembles the
request with its cache-stable prefix, and answers. Without a conversation id a new
conversation starts (its first message's leading system message, if any, becomes its system
prompt) and its id comes back in the ``X-Threadline-Conversation`` header and the response's
``threadline`` field. ``Idempotency-Key`` makes a retried request return the first answer.
Streaming uses OpenAI's chunk format, ending in ``data: [DONE]``. A conversation started with
a user's token is that user's; naming another user's is refused (``server/access.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI, Header
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict

from threadline.engine import Engine, TurnResult
from threadline.errors import InputError
from threadline.items import new_id
from threadline.server import access
from threadline.server.access import CallerDep
from threadline.server.streams import error_body, pump
from threadline.stores.base import MAIN, Commit, NewConversation

CONVERSATION_HEADER = "X-Threadline-Conversation"


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
    ) -> dict[str, Any] | Response:
        cid = conversation or (body.metadata or {}).get("conversation_id")
        text = _new_message(body.messages)
        if cid is not None:
            access.conversation(caller, store, cid)  # 404/403 before anything is written
        access.client_message(caller, store, idempotency_key)
        if cid is None:
            system = next((_text(m) for m in body.messages if m.role == "system"), None)
            cid = new_id("c_")
            store.commit(Commit(conversation_id=cid, created_at=engine.clock(),
                                expected_head=None, create=NewConversation(
                                    cid, system=system, owner=caller.user_id)))

        def run(on_text: Callable[[str], None] | None) -> TurnResult:
            return engine.run_turn(text, conversation_id=cid, branch=MAIN,
                                   client_msg_id=idempotency_key, on_text=on_text)

        headers = {CONVERSATION_HEADER: cid}
        if not body.stream:
            return JSONResponse(_completion(run(None)), headers=headers)
        return StreamingResponse(_chunks(run, engine.model.model_id),
                                 media_type="text/event-stream",
                                 headers={**headers, "Cache-Control": "no-cache"})


def _new_message(messages: list[ChatMessage]) -> str:
    users = [m for m in messages if m.role == "user"]
    if not users:
        raise InputError("the request has no user message; send the new message with role "
                         "'user'", hint="the server keeps the history: send only what is new")
    return _text(users[-1])


def _text(message: ChatMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    parts = message.content or []
    texts = [p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    if len(texts) != len(parts) or not all(isinstance(t, str) for t in texts):
        raise InputError("only text content is supported (parts of type 'text')")
    return "\n".join(str(t) for t in texts)


def _completion(result: TurnResult) -> dict[str, Any]:
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
        "threadline": {"conversation_id": result.conversation_id, "turn": result.turn,
                       "call_id": call.id, "deduplicated": result.deduplicated},
    }


def _chunks(run: Callable[[Callable[[str], None]], TurnResult], model_id: str) -> Iterator[str]:
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
            result = _completion(value)
            yield chunk({}, result["choices"][0]["finish_reason"], usage=result["usage"],
                        threadline=result["threadline"])
        else:
            yield f"data: {json.dumps(error_body(value))}\n\n"
    yield "data: [DONE]\n\n"
