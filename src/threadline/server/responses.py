"""The Responses API subset that keeps state on the server, as current OpenAI clients and the
Agents SDK use it: ``POST /v1/responses`` (``input``, ``instructions``,
``previous_response_id``, ``store``, ``stream``), ``GET`` and ``DELETE /v1/responses/{id}``.

A response id names a point in a branch: the user message its request added and the reply
that answered it. ``previous_response_id`` continues from that point: on the same branch while
it is the branch's newest turn, else (a later message was sent there) on a new branch forked
at the reply, the original left intact. Without it a new conversation starts: its system
prompt is ``instructions`` followed by any leading system or developer messages of ``input``
(with neither, the engine's default), and the messages before the last are its history.

Where this differs from OpenAI, and why:

- ``instructions`` are the conversation's system prompt, the start of its cache-stable
  prefix, so a chain keeps the ones it began with: a continuation may repeat them or leave
  them out (the response shows them either way); different ones are refused with 400.
- With ``previous_response_id``, ``input`` is the new user message only (a string, or one
  user message): the history is on the server.
- ``store: false`` keeps nothing: the turn runs in a conversation of its own that is deleted
  once it is answered (or has failed), so the id never resolves. It cannot continue a stored
  response, which would mean appending to that conversation.
- Client-side tools, structured output, ``conversation`` and ``background`` are refused, not
  ignored; other sampling fields are the model's business and are not checked.
- ``DELETE`` makes an id stop resolving (``GET`` and chaining from it answer 404); the
  conversation's items stay, since every response chained after it has them in its history.
  Deleting the conversation (``DELETE /v1/conversations/{id}``) removes it all.

``Idempotency-Key`` makes a retried request return the first response (with ``store: false``
nothing is kept for a retry to find: it runs again). The conversation and branch come back in
the ``X-Threadline-Conversation`` and ``X-Threadline-Branch`` headers and the response's
``threadline`` field. Streaming sends the SDK's events (``response_events.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from fastapi import FastAPI, Header
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from threadline.engine import Engine, TurnResult
from threadline.errors import (
    ClientMessageConflict,
    ConflictError,
    EmptyMessage,
    InputError,
    NotFound,
    TurnSuperseded,
)
from threadline.items import ItemKind, NewItem, new_id, validate_text
from threadline.server import access
from threadline.server.access import CallerDep
from threadline.server.openai_compat import CONVERSATION_HEADER
from threadline.server.response_events import Answer, Draft, events, response_object
from threadline.stores.base import MAIN, Commit, NewConversation, Store
from threadline.stores.responses import ResponseBackend, ResponseRecord, UnknownResponse
from threadline.turn.ingest import retried
from threadline.turn.input import TurnInput

BRANCH_HEADER = "X-Threadline-Branch"
_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text")
_SYSTEM_HINT = ("threadline keeps one system prompt per conversation, at its start: put "
                "system and developer messages first in input, or in instructions")


class ResponsesBody(BaseModel):
    model_config = ConfigDict(extra="allow")  # sampling fields are the model's business
    model: str | None = Field(default=None, description="Ignored: the engine's model answers.")
    input: str | list[dict[str, Any]] = Field(
        description="The user's message, or messages: the last is the new one, any before it "
                    "the history of a new conversation.")
    instructions: str | None = Field(
        default=None, description="The system prompt of a new conversation; a continuation "
                                  "repeats them or leaves them out.")
    previous_response_id: str | None = Field(
        default=None, description="Continue from this response (forking a branch if it is "
                                  "not the newest on its own).")
    store: bool = Field(default=True, description="False: keep nothing once answered.")
    stream: bool = Field(default=False, description="Reply as server-sent events.")
    metadata: dict[str, str] | None = None
    tools: list[Any] | None = None


@dataclass(frozen=True)
class Asked:
    """What ``input`` asks: the new user message, and what goes before it."""

    text: str
    system: tuple[str, ...] = ()       # leading system and developer messages
    history: tuple[NewItem, ...] = ()  # earlier user and assistant messages


@dataclass(frozen=True)
class Place:
    """Where a request's turn runs; ``follows``: the head it must still find there (None on a
    conversation or branch that only this request knows yet)."""

    conversation_id: str
    branch: str
    follows: int | None = None


def add_responses(app: FastAPI, engine: Engine) -> None:
    store = engine.store

    @app.post("/v1/responses", response_model=None)
    def create_response(
            body: ResponsesBody,
            caller: CallerDep,
            idempotency_key: str | None = Header(default=None, alias="Idempotency-Key"),
    ) -> dict[str, Any] | Response:
        records = _records(store)
        access.client_message(caller, store, idempotency_key)
        _refuse_unsupported(body)
        asked = _asked(body.input, engine.max_message_bytes)
        previous = None
        if body.previous_response_id is not None:
            if not body.store:
                raise InputError("store=false cannot continue a stored response: its turn "
                                 "would be appended to that response's conversation",
                                 hint="send store=true, or send the whole history as input "
                                      "without previous_response_id")
            previous = records.get(body.previous_response_id)  # 404 before anything is written
            access.conversation(caller, store, previous.conversation_id)  # another user's: 403
            if asked.system or asked.history:
                raise InputError("with previous_response_id, input is the new user message "
                                 "only (a string, or one message with role 'user')",
                                 hint="the server keeps the history: send only what is new")
        key = idempotency_key if body.store else None  # store=false keeps nothing to find
        draft = Draft(new_id("resp_"), engine.clock(), engine.model.model_id, "", MAIN,
                      body.store, body.previous_response_id,
                      _instructions(previous, body.instructions), dict(body.metadata or {}))
        seen = _retried(store, records, asked.text, key, previous, draft)
        place, draft = seen or _place(engine, previous, asked, draft, caller.user_id)
        client_msg_id = key or draft.id  # tells a superseded try whether it wrote its message
        made = seen is None and previous is None  # this request made the conversation

        def run(on_text: Callable[[str], None] | None) -> TurnResult:
            try:
                try:
                    result = _answer(engine, asked.text, place, client_msg_id, previous,
                                     on_text)
                except ClientMessageConflict:
                    if made and body.store:  # the key went in elsewhere meanwhile
                        _raced(store, records, asked.text, key, draft, place)
                    raise
                if body.store:  # in the turn's thread: kept even if the client has gone
                    records.save(_record(draft, result))
                return result
            finally:
                if not body.store:
                    store.delete_conversation(place.conversation_id)

        headers = {CONVERSATION_HEADER: place.conversation_id, BRANCH_HEADER: place.branch}
        if not body.stream:
            result = run(None)
            headers[BRANCH_HEADER] = result.branch
            return JSONResponse(response_object(draft, Answer.of(result)), headers=headers)
        return StreamingResponse(events(run, draft), media_type="text/event-stream",
                                 headers={**headers, "Cache-Control": "no-cache"})

    @app.get("/v1/responses/{response_id}")
    def get_response(response_id: str, caller: CallerDep) -> JSONResponse:
        record = _records(store).get(response_id)
        cid = record.conversation_id
        access.conversation(caller, store, cid)
        try:
            call = store.call(record.call_id)
        except NotFound:
            call = None  # a reply served from another conversation's answer, since deleted
        answer = Answer(store.item(cid, record.message_seq), store.item(cid, record.reply_seq),
                        call)
        draft = Draft(record.id, record.created_at, engine.model.model_id, cid,
                      record.branch, True, record.previous_response_id, record.instructions,
                      dict(record.metadata))
        return JSONResponse(response_object(draft, answer),
                            headers={CONVERSATION_HEADER: cid, BRANCH_HEADER: record.branch})

    @app.delete("/v1/responses/{response_id}")
    def delete_response(response_id: str, caller: CallerDep) -> dict[str, Any]:
        access.conversation(caller, store, _records(store).get(response_id).conversation_id)
        _records(store).delete(response_id, engine.clock())
        return {"id": response_id, "object": "response", "deleted": True}


def _records(store: Store) -> ResponseBackend:
    records = store.responses
    if records is None:
        raise InputError(f"{type(store).__name__} keeps no response records, so "
                         "/v1/responses cannot run on it",
                         hint="serve with a store that keeps them (SQLite or PostgreSQL)")
    return records


def _refuse_unsupported(body: ResponsesBody) -> None:
    """What would change the answer's meaning if it were ignored is refused instead."""
    extra = body.model_extra or {}
    if body.tools:
        raise InputError("client-side tools are not supported here: threadline runs the "
                         "tools configured on its engine, on the server",
                         hint="leave tools out")
    if extra.get("conversation") is not None:
        raise InputError("the conversation parameter is not supported",
                         hint="chain responses with previous_response_id")
    if extra.get("background"):
        raise InputError("background responses are not supported",
                         hint="use stream=true to see the reply as it is generated")
    text = extra.get("text")
    found = text.get("format") if isinstance(text, Mapping) else None
    if isinstance(found, Mapping) and found.get("type", "text") != "text":
        raise InputError(f"text.format {found.get('type')!r} is not supported: the reply is "
                         "plain text", hint="leave text.format out, or use type 'text'")


def _asked(value: str | list[dict[str, Any]], max_bytes: int) -> Asked:
    if isinstance(value, str):
        return Asked(_checked(value, "input", max_bytes))
    if not value:
        raise InputError("input is an empty list",
                         hint="send the user's message, as a string or a message with role "
                              "'user'")
    messages = [_message(n, item, max_bytes) for n, item in enumerate(value)]
    lead = next((n for n, (role, _) in enumerate(messages)
                 if role not in ("system", "developer")), len(messages))
    for n, (role, _) in enumerate(messages[lead:], start=lead):
        if role in ("system", "developer"):
            raise InputError(f"input[{n}] is a {role} message after the conversation has "
                             "begun", hint=_SYSTEM_HINT)
    rest = messages[lead:]
    if not rest or rest[-1][0] != "user":
        raise InputError("the last item of input must be the new user message (role 'user')",
                         hint="the reply answers the last message, so it must be the user's")
    history = tuple(NewItem.user(text) if role == "user" else NewItem.assistant(text)
                    for role, text in rest[:-1])
    return Asked(rest[-1][1], tuple(text for _, text in messages[:lead]), history)


def _message(n: int, item: Mapping[str, Any], max_bytes: int) -> tuple[str, str]:
    """An input item as (role, text); anything that is not a text message is refused."""
    kind = item.get("type", "message")
    if kind != "message":
        hint = "tools run on the server here; a client does not send their calls or outputs" \
            if "call" in str(kind) else "send messages with role user, assistant, system or " \
                                        "developer"
        raise InputError(f"input[{n}] is a {kind!r} item; only messages are supported",
                         hint=hint)
    role = item.get("role")
    if role not in _ROLES:
        raise InputError(f"input[{n}] has role {role!r}",
                         hint="use user, assistant, system or developer")
    content = item.get("content")
    if isinstance(content, str):
        return role, _checked(content, f"input[{n}]", max_bytes)
    if not isinstance(content, list):
        raise InputError(f"input[{n}].content must be a string or a list of text parts")
    texts = []
    for k, part in enumerate(content):
        if not isinstance(part, Mapping) or part.get("type") not in _TEXT_PARTS \
                or not isinstance(part.get("text"), str):
            what = part.get("type") if isinstance(part, Mapping) else type(part).__name__
            raise InputError(f"input[{n}].content[{k}] is a {what!r} part; only text parts "
                             f"({', '.join(_TEXT_PARTS)}) are supported")
        texts.append(part["text"])
    return role, _checked("\n".join(texts), f"input[{n}]", max_bytes)


def _checked(text: str, where: str, max_bytes: int) -> str:
    """The text as it will be stored, or its refusal saying which input it was."""
    try:
        return validate_text(text, max_bytes=max_bytes)
    except InputError as err:
        err.message = f"{where}: {err.message}"  # the same error, placed
        if isinstance(err, EmptyMessage):
            err.hint = "send some text"
        raise


def _instructions(previous: ResponseRecord | None, given: str | None) -> str | None:
    """The instructions a response runs under: a chain keeps those it began with."""
    if previous is None or given is None or given == previous.instructions:
        return given if previous is None else previous.instructions
    raise InputError(f"instructions differ from those of response {previous.id}'s "
                     "conversation; they are its system prompt, which a continuation cannot "
                     "change", hint="send the same instructions (or none) to continue, or "
                                    "omit previous_response_id to start a new conversation")


def _retried(store: Store, records: ResponseBackend, text: str, key: str | None,
             previous: ResponseRecord | None, draft: Draft) -> tuple[Place, Draft] | None:
    """Where a retried request's first send went, and its response (if one was kept); a key
    that is malformed or was used for another message is refused before anything is written."""
    seen = retried(store, text, client_msg_id=key, branch=MAIN,
                   conversation_id=None if previous is None else previous.conversation_id)
    if seen is None:
        return None
    place = Place(seen.conversation_id, seen.branch)
    first = records.for_message(seen.conversation_id, seen.message.seq)
    if first is None:  # the first send failed before it was answered: answer it now
        return place, replace(draft, conversation_id=place.conversation_id,
                              branch=place.branch)
    if first.deleted_at is not None:
        raise UnknownResponse(first.id, deleted=True)
    return place, replace(draft, id=first.id, created_at=first.created_at,
                          conversation_id=first.conversation_id, branch=first.branch,
                          previous_response_id=first.previous_response_id,
                          instructions=first.instructions, metadata=dict(first.metadata))


def _raced(store: Store, records: ResponseBackend, text: str, key: str | None, draft: Draft,
           place: Place) -> None:
    """Another send of the same key wrote its message while this one placed its turn (both
    looked before either wrote): the conversation this one made holds only its input's
    history, and goes; then the key's first send decides, as for any retry."""
    store.delete_conversation(place.conversation_id)
    if _retried(store, records, text, key, None, draft) is not None:
        raise IdempotencyInProgress(key)


class IdempotencyInProgress(ConflictError):
    def __init__(self, key: str | None) -> None:
        super().__init__(f"a request with Idempotency-Key {key!r} was being answered while "
                         "this one arrived; nothing of this one was kept",
                         hint="retry with the same key: it returns that request's response")


def _place(engine: Engine, previous: ResponseRecord | None, asked: Asked,
           draft: Draft, owner: str | None) -> tuple[Place, Draft]:
    """Where the turn runs: a new conversation (``owner``'s, with the input's history), the
    previous response's branch, or a fork at its reply."""
    store = engine.store
    if previous is None:
        cid = new_id("c_")
        system = "\n\n".join(p for p in (draft.instructions, *asked.system) if p)
        store.commit(Commit(conversation_id=cid, created_at=engine.clock(), expected_head=None,
                            create=NewConversation(cid, system=system or engine.system,
                                                   owner=owner),
                            items=asked.history))
        place = Place(cid, MAIN)
    else:
        history = store.history(previous.conversation_id, previous.branch)
        answered_after = any(i.kind is ItemKind.USER and i.seq > previous.reply_seq
                             for i in history)
        place = _fork(engine, previous) if answered_after else \
            Place(previous.conversation_id, previous.branch, follows=history[-1].seq)
    return place, replace(draft, conversation_id=place.conversation_id, branch=place.branch)


def _fork(engine: Engine, previous: ResponseRecord) -> Place:
    branch = engine.fork(previous.conversation_id, previous.reply_seq)
    return Place(previous.conversation_id, branch.name)


def _answer(engine: Engine, text: str, place: Place, client_msg_id: str,
            previous: ResponseRecord | None,
            on_text: Callable[[str], None] | None) -> TurnResult:
    def run_at(at: Place) -> TurnResult:
        return engine.run_turn(TurnInput(text, at.conversation_id, at.branch, client_msg_id,
                                         follows=at.follows), on_text=on_text)
    try:
        return run_at(place)
    except TurnSuperseded:
        # another turn went in after the previous response meanwhile: unless this message
        # was written, answer it where it would have gone had it come second, on a fork
        if previous is None or place.follows is None or \
                engine.store.find_client_message(client_msg_id) is not None:
            raise
    return run_at(_fork(engine, previous))


def _record(draft: Draft, result: TurnResult) -> ResponseRecord:
    return ResponseRecord(draft.id, result.conversation_id, result.branch, result.message.seq,
                          result.reply.seq, result.call.id, draft.created_at,
                          draft.previous_response_id, draft.instructions, draft.metadata)


__all__ = ["BRANCH_HEADER", "add_responses"]
