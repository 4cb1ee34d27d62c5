"""The HTTP service: conversations, turns (JSON or a server-sent event stream), forks and the
exact record of every model call, with an OpenAPI spec at ``/openapi.json``.

One engine serves every request. Each conversation runs one turn at a time under its lease
(a message that arrives meanwhile queues, is refused with 409 and ``Retry-After``, or cancels
the running turn, as the request's ``on_busy`` says); the engine's model runs one call at a
time; reads never wait. Every error is a JSON body ``{"error": {"type",
"message", "hint"}}`` with the status its kind implies, and changes nothing. Given a
:class:`Metrics` (fed by the same engine), ``GET /metrics`` serves them in the Prometheus text
format (docs/observability.md); given a :class:`Tracing`, each request's trace context is
the parent of the turn it runs.

Who may call what is decided in ``server/access.py``: every route but the public ones takes
the caller (``CallerDep``) and checks what it names against it before it reads or writes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from fastapi import FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from threadline.engine import Engine, TurnResult
from threadline.errors import (
    ConflictError,
    Forbidden,
    InputError,
    ModelError,
    NotFound,
    ProviderOverloaded,
    ProviderRateLimited,
    StoreError,
    ThreadlineError,
    TurnInProgress,
    Unauthorized,
)
from threadline.items import format_time
from threadline.memory.store import user_id_checked
from threadline.server import access, guards
from threadline.server.access import CallerDep
from threadline.server.memory import add_memory_routes
from threadline.server.openai_compat import add_chat_completions
from threadline.server.responses import add_responses
from threadline.server.streams import (
    error_body,
    live_events,
    resume_position,
    resumed_events,
)
from threadline.stores.base import MAIN
from threadline.turn import review
from threadline.turn.children import delegations, delete_with_children
from threadline.turn.delegate import Delegation
from threadline.turn.fork import fork as fork_branch
from threadline.version import __version__

if TYPE_CHECKING:  # prometheus-client is an extra: only a caller that has it passes Metrics
    from threadline.metrics.registry import Metrics
    from threadline.tracing.setup import Tracing  # so is OpenTelemetry (the otel extra)

# a provider that is overloaded or rate-limiting: the client should come back later
_STATUS = [(InputError, 400), (Forbidden, 403), (NotFound, 404), (ConflictError, 409),
           (ProviderOverloaded, 503), (ProviderRateLimited, 503), (ModelError, 502),
           (StoreError, 503)]  # Unauthorized: 401, from access.refusal


class DelegationBody(BaseModel):
    max_depth: int = Field(default=1, ge=1, le=8,
                           description="Generations of sub-agents below the conversation.")
    max_fanout: int = Field(default=4, ge=1, le=32, description="Delegations per turn.")


class NewConversationBody(BaseModel):
    system: str | None = Field(default=None, description="System prompt for the conversation.")
    title: str | None = None
    owner: str | None = Field(
        default=None, description="The user whose conversation it is: only an admin token "
                                  "may name one; a user token's conversations are its user's.")
    delegation: DelegationBody | None = Field(
        default=None, description="Let the conversation's turns delegate tasks to the "
                                  "service's sub-agents (default: the service's setting).")


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


def create_app(engine: Engine, metrics: Metrics | None = None, *,
               require_tokens: bool = False, tracing: Tracing | None = None) -> FastAPI:
    """The service over the engine's store; with ``require_tokens``, every request needs a
    bearer token even while none exists (otherwise only once one does). With ``tracing``
    (the engine's tracer), each request's trace context (``traceparent``) is the parent of
    the turn it runs."""
    app = FastAPI(title="threadline", version=__version__,
                  description="Durable, prompt-cache-aware multi-turn conversations.")
    store = engine.store
    # JSON escaping can make a message's body several times its text; past this, nothing
    # the handlers accept could be in it
    guards.install(app, max_body_bytes=8 * engine.max_message_bytes + 64 * 1024)
    access.install(app, store.tokens, required=require_tokens)
    if tracing is not None:
        tracing.install(app)  # outermost: the context is current for everything inside

    @app.exception_handler(ThreadlineError)
    def _error(_: Request, err: ThreadlineError) -> JSONResponse:
        if isinstance(err, Unauthorized):
            return access.refusal(err)  # with its challenge
        wait = err.retry_after_s if isinstance(err, TurnInProgress | ProviderRateLimited) \
            else None
        headers = None if wait is None else {"Retry-After": str(math.ceil(wait))}
        return JSONResponse(status_code=_status(err), content=error_body(err), headers=headers)

    @app.post("/v1/conversations", status_code=201)
    def create_conversation(body: NewConversationBody, caller: CallerDep) -> dict[str, Any]:
        named = None if body.owner is None else user_id_checked(body.owner)
        owner = caller.acting_for(named, "owner")
        if body.delegation is not None and not engine.delegator.agents:
            raise InputError("this service has no sub-agents to delegate to",
                             hint="leave out 'delegation', or start the service with agents")
        limits = None if body.delegation is None else Delegation(**body.delegation.model_dump())
        cid = engine.new_conversation(system=body.system, title=body.title, owner=owner,
                                      delegation=limits)
        return store.conversation(cid).to_json()

    @app.get("/v1/conversations")
    def list_conversations(caller: CallerDep,
                           limit: int | None = Query(default=None, ge=1, le=100_000)
                           ) -> list[Any]:
        """Newest activity first: a user token's own, an admin's all."""
        return [s.to_json() for s in store.conversations(limit=limit, owner=caller.user_id)]

    @app.get("/v1/review")
    def review_queue(caller: CallerDep, resolved: bool = False,
                     limit: int | None = Query(default=None, ge=1, le=100_000)) -> list[Any]:
        """The conversations the trajectory monitor flagged for review, newest flag first
        (with ``resolved``, the resolved ones too): every user's, so only for an admin."""
        if not caller.admin:
            raise Forbidden("the review queue covers every user's conversations; this token "
                            f"is {caller.user_id!r}'s", hint="use an admin token")
        return [f.to_json() for f in review.queue(store, resolved=resolved, limit=limit)]

    @app.get("/v1/conversations/{conversation_id}")
    def get_conversation(conversation_id: str, caller: CallerDep,
                         branch: str = MAIN) -> dict[str, Any]:
        conversation = access.conversation(caller, store, conversation_id)
        return {"conversation": conversation.to_json(), "branch": branch,
                "branches": [b.to_json() for b in store.branches(conversation_id)],
                "items": [i.to_json() for i in store.history(conversation_id, branch)]}

    @app.delete("/v1/conversations/{conversation_id}", status_code=204)
    def delete_conversation(conversation_id: str, caller: CallerDep) -> Response:
        access.conversation(caller, store, conversation_id)
        delete_with_children(store, conversation_id)  # its sub-agents' conversations too
        return Response(status_code=204)

    @app.post("/v1/conversations/{conversation_id}/messages", response_model=None)
    def post_message(conversation_id: str, body: MessageBody,
                     caller: CallerDep) -> dict[str, Any] | Response:
        # whose it is (403) before anything; that the conversation and branch exist (404) is
        # checked here only before a stream, which could no longer answer 404 once started:
        # a plain request's turn refuses them itself, before it writes
        if not caller.admin:
            access.conversation(caller, store, conversation_id)
        if body.stream:
            store.head(conversation_id, body.branch)
        # a user token's turn names a user (for memory) only when asked, and only its own
        user_id = None if body.user_id is None else caller.acting_for(body.user_id, "user_id")
        access.client_message(caller, store, body.client_msg_id)

        def run(on_text: Callable[[str], None] | None) -> TurnResult:
            return engine.run_turn(body.text, conversation_id=conversation_id,
                                   branch=body.branch, client_msg_id=body.client_msg_id,
                                   on_text=on_text, on_busy=body.on_busy,
                                   user_id=user_id)

        if not body.stream:  # JSON-native already: FastAPI's encoder would walk it again
            return JSONResponse(run(None).to_json())
        return StreamingResponse(live_events(run, store, conversation_id, engine.clock),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    @app.get("/v1/generations/{generation_id}/events")
    def resume(generation_id: str, caller: CallerDep,
               offset: int | None = Query(default=None, ge=0),
               last_event_id: str | None = Header(default=None, alias="Last-Event-ID")
               ) -> StreamingResponse:
        """Resume a stream from an offset (``?offset=`` or ``Last-Event-ID``) without running
        the model again; any replica over the same store can serve it."""
        generation = store.generation(generation_id)
        if generation is None:
            raise UnknownGeneration(generation_id)
        access.generation(caller, store, generation)
        start = resume_position(generation_id, last_event_id, offset)
        events = resumed_events(store, generation, start)
        first = next(events, None)  # a bad offset fails here, as a JSON error
        return StreamingResponse(_prepend(first, events), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    @app.post("/v1/conversations/{conversation_id}/fork", status_code=201)
    def fork(conversation_id: str, body: ForkBody, caller: CallerDep) -> dict[str, Any]:
        access.conversation(caller, store, conversation_id)
        return fork_branch(store, conversation_id, body.from_seq, body.name,
                           clock=engine.clock).to_json()

    @app.get("/v1/conversations/{conversation_id}/calls")
    def list_calls(conversation_id: str, caller: CallerDep,
                   branch: str | None = None) -> list[Any]:
        access.conversation(caller, store, conversation_id)
        return [c.to_json(with_request=False) for c in store.calls(conversation_id,
                                                                   branch=branch)]

    @app.get("/v1/conversations/{conversation_id}/children")
    def list_children(conversation_id: str, caller: CallerDep) -> list[Any]:
        """The sub-agent conversations this one started, in the order they were asked for."""
        access.conversation(caller, store, conversation_id)
        return [child.to_json() for child in delegations(store, conversation_id)]

    @app.get("/v1/calls/{call_id}")
    def get_call(call_id: str, caller: CallerDep, request: bool = False) -> dict[str, Any]:
        return access.call(caller, store, call_id).to_json(with_request=request)

    add_chat_completions(app, engine)
    add_responses(app, engine)
    add_memory_routes(app, engine)

    if metrics is not None:
        exported = metrics

        @app.get("/metrics", include_in_schema=False)
        def scrape(caller: CallerDep) -> Response:
            """Prometheus metrics, in the text exposition format: counts across every user,
            so only for an admin (any caller of an open service is one)."""
            if not caller.admin:
                raise Forbidden("metrics cover every user's turns; this token is "
                                f"{caller.user_id!r}'s", hint="scrape with an admin token")
            return Response(exported.exposition(), media_type=exported.content_type)

    @app.get("/healthz")  # public (access.PUBLIC_PATHS): says nothing about the data
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
