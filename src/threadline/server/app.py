"""The HTTP service: conversations, turns (JSON or a server-sent event stream), forks and the
exact record of every model call, with an OpenAPI spec at ``/openapi.json``.

One engine serves every request. Each conversation runs one turn at a time under its lease
(a message that arrives meanwhile queues, is refused with 409 and ``Retry-After``, or cancels
the running turn, as the request's ``on_busy`` says); the engine's model runs one call at a
time; reads never wait. Every error is a JSON body ``{"error": {"type",
"message", "hint"}}`` with the status its kind implies, and changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, Literal

from fastapi import FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from threadline.engine import Engine, TurnResult
from threadline.errors import (
    ConflictError,
    InputError,
    ModelError,
    NotFound,
    StoreError,
    ThreadlineError,
    TurnInProgress,
)
from threadline.items import format_time, new_id
from threadline.server import guards
from threadline.server.memory import add_memory_routes
from threadline.server.openai_compat import add_chat_completions
from threadline.server.responses import add_responses
from threadline.server.streams import (
    error_body,
    live_events,
    resume_position,
    resumed_events,
)
from threadline.stores.base import MAIN, Commit, NewConversation
from threadline.turn.fork import fork as fork_branch
from threadline.version import __version__

_STATUS = [(InputError, 400), (NotFound, 404), (ConflictError, 409), (ModelError, 502),
           (StoreError, 503)]


class NewConversationBody(BaseModel):
    system: str | None = Field(default=None, description="System prompt for the conversation.")
    title: str | None = None


class MessageBody(BaseModel):
    text: str = Field(description="The user's message.")
    branch: str = MAIN
    client_msg_id: str | None = Field(
        default=None, description="Resending the same id returns the first result.")
    stream: bool = Field(default=False, description="Reply as server-sent events.")
    on_busy: Literal["queue", "reject", "cancel"] = Field(
        default="queue", description="While another turn runs here: wait, refuse (409), or "
                                     "cancel it and go next.")
    user_id: str | None = Field(
        default=None, description="Whose message: what is remembered about this user that "
                                  "bears on it is recalled into the turn, and the memory "
                                  "writer learns from it later.")


class ForkBody(BaseModel):
    from_seq: int | None = Field(description="The item the branch grows from (null: empty).")
    name: str | None = None


def create_app(engine: Engine) -> FastAPI:
    app = FastAPI(title="threadline", version=__version__,
                  description="Durable, prompt-cache-aware multi-turn conversations.")
    store = engine.store
    # JSON escaping can make a message's body several times its text; past this, nothing
    # the handlers accept could be in it
    guards.install(app, max_body_bytes=8 * engine.max_message_bytes + 64 * 1024)

    @app.exception_handler(ThreadlineError)
    def _error(_: Request, err: ThreadlineError) -> JSONResponse:
        headers = {"Retry-After": str(math.ceil(err.retry_after_s))} \
            if isinstance(err, TurnInProgress) else None
        return JSONResponse(status_code=_status(err), content=error_body(err), headers=headers)

    @app.post("/v1/conversations", status_code=201)
    def create_conversation(body: NewConversationBody) -> dict[str, Any]:
        cid = new_id("c_")
        store.commit(Commit(conversation_id=cid, created_at=engine.clock(), expected_head=None,
                            create=NewConversation(cid, title=body.title, system=body.system)))
        return store.conversation(cid).to_json()

    @app.get("/v1/conversations")
    def list_conversations(limit: int | None = Query(default=None, ge=1, le=100_000)
                           ) -> list[Any]:
        return [s.to_json() for s in store.conversations(limit=limit)]

    @app.get("/v1/conversations/{conversation_id}")
    def get_conversation(conversation_id: str, branch: str = MAIN) -> dict[str, Any]:
        conversation = store.conversation(conversation_id)
        return {"conversation": conversation.to_json(), "branch": branch,
                "branches": [b.to_json() for b in store.branches(conversation_id)],
                "items": [i.to_json() for i in store.history(conversation_id, branch)]}

    @app.delete("/v1/conversations/{conversation_id}", status_code=204)
    def delete_conversation(conversation_id: str) -> Response:
        store.delete_conversation(conversation_id)
        return Response(status_code=204)

    @app.post("/v1/conversations/{conversation_id}/messages", response_model=None)
    def post_message(conversation_id: str, body: MessageBody) -> dict[str, Any] | Response:
        store.conversation(conversation_id)  # a 404 before anything is written
        store.head(conversation_id, body.branch)

        def run(on_text: Callable[[str], None] | None) -> TurnResult:
            return engine.run_turn(body.text, conversation_id=conversation_id,
                                   branch=body.branch, client_msg_id=body.client_msg_id,
                                   on_text=on_text, on_busy=body.on_busy,
                                   user_id=body.user_id)

        if not body.stream:
            return run(None).to_json()
        return StreamingResponse(live_events(run, store, conversation_id, engine.clock),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    @app.get("/v1/generations/{generation_id}/events")
    def resume(generation_id: str, offset: int | None = Query(default=None, ge=0),
               last_event_id: str | None = Header(default=None, alias="Last-Event-ID")
               ) -> StreamingResponse:
        """Resume a stream from an offset (``?offset=`` or ``Last-Event-ID``) without running
        the model again; any replica over the same store can serve it."""
        generation = store.generation(generation_id)
        if generation is None:
            raise UnknownGeneration(generation_id)
        start = resume_position(generation_id, last_event_id, offset)
        events = resumed_events(store, generation, start)
        first = next(events, None)  # a bad offset fails here, as a JSON error
        return StreamingResponse(_prepend(first, events), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    @app.post("/v1/conversations/{conversation_id}/fork", status_code=201)
    def fork(conversation_id: str, body: ForkBody) -> dict[str, Any]:
        return fork_branch(store, conversation_id, body.from_seq, body.name,
                           clock=engine.clock).to_json()

    @app.get("/v1/conversations/{conversation_id}/calls")
    def list_calls(conversation_id: str, branch: str | None = None) -> list[Any]:
        return [c.to_json(with_request=False) for c in store.calls(conversation_id,
                                                                   branch=branch)]

    @app.get("/v1/calls/{call_id}")
    def get_call(call_id: str, request: bool = False) -> dict[str, Any]:
        return store.call(call_id).to_json(with_request=request)

    add_chat_completions(app, engine)
    add_responses(app, engine)
    add_memory_routes(app, engine)

    @app.get("/healthz")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__, "time": format_time(engine.clock())}

    return app


class UnknownGeneration(NotFound):
    def __init__(self, generation_id: str) -> None:
        super().__init__(f"no generation {generation_id}",
                         hint="use the generation_id of the stream's first event")


def _prepend(first: str | None, rest: Iterator[str]) -> Iterator[str]:
    if first is not None:
        yield first
    yield from rest


def _status(err: ThreadlineError) -> int:
    return next((code for kind, code in _STATUS if isinstance(err, kind)), 500)


__all__ = ["create_app"]
