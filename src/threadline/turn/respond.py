"""Respond: call the model on a user message and, while it asks for tools, run them.

Each round: the compactor may compact first (``turn/compactor.py``), the request is
assembled, the model is called under the engine's lock, and the call is recorded with its
prefix report (``cache/attribution.py``). A reply ends the turn; tool calls are committed with
their call record before any runs ("decided"), each result is committed as soon as it is known
("executed"), and the model is called again. After ``max_rounds`` rounds, or past the turn's
token budget, the last call is made with ``tool_choice="none"`` (the tools stay in the prefix).
A turn replayed after a crash runs only the decided calls that have no result yet. Each
call, and each commit of what it produced, runs in a span of the engine's tracer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from threadline.cache.attribution import Previous, report
from threadline.cache.prefix import PrefixReport
from threadline.calls import ModelCall
from threadline.errors import ModelCallFailed, ThreadlineError, TurnCancelled
from threadline.items import Item, ItemKind, NewItem
from threadline.models.base import OnText
from threadline.models.calling import call_model, sent_request
from threadline.plugin import Host
from threadline.stores.base import Store, append
from threadline.turn.commit import commit_reply, record_failure
from threadline.turn.compactor import Compactor
from threadline.turn.lease import Holding
from threadline.turn.observe import Observer
from threadline.turn.result import TurnResult
from threadline.turn.tools import (
    Toolbox,
    call_items,
    execute_in_order,
    not_run,
    open_turn,
    pending_calls,
)
from threadline.turn.trace import Step, Tracer


class Responder(Host, Protocol):
    toolbox: Toolbox
    compactor: Compactor | None
    observer: Observer
    tracer: Tracer


def respond(engine: Responder, message: Item, branch: str, on_text: OnText | None, *,
            head: Item, holding: Holding | None, calls: list[ModelCall]) -> TurnResult:
    """Answer user ``message``. ``head`` is the branch's newest item (the message, or what
    was recorded after it: context, a compaction, this turn's tool calls and results). Every
    call made is appended to ``calls``, failed ones too."""
    store, model, clock = engine.store, engine.model, engine.clock
    limits = engine.toolbox.limits
    rounds, spent = 0, 0
    results: list[Item] = []
    while True:
        request = None
        if engine.compactor is not None:
            before = head
            head, request = engine.compactor.before_call(engine, head, branch)
            if head is not before and head.kind is ItemKind.COMPACTION:
                engine.observer.compacted(head)
        request = request or engine.assembler(head.conversation_id, branch)(
            store.history(head.conversation_id, branch, through=head))
        if rounds >= limits.max_rounds or (limits.max_turn_tokens is not None
                                           and spent >= limits.max_turn_tokens):
            request = replace(request, tool_choice="none")  # the loop's last call
        with engine.tracer.span(Step.MODEL_CALL, model.model_id, request, head) as span:
            with engine.model_lock:  # one backend instance runs one call at a time
                outcome = call_model(model, request, clock=clock, on_text=on_text)
            span.record(outcome)
            sent = sent_request(request, outcome, model.model_id)
            completion = outcome.completion
            measured = report(sent, request, previous(store, head.conversation_id, branch))
            if completion is not None and completion.reused_from is not None:
                measured = replace(measured, reused_from=completion.reused_from,
                                   restore_ms=completion.restore_ms)
            span.record(measured)
        prefix = measured.to_json()
        if completion is None:
            with engine.tracer.span(Step.COMMIT, "failed_call") as span:
                call = record_failure(store, head=head, branch=branch, request=request,
                                      outcome=outcome, model_id=model.model_id, clock=clock,
                                      prefix=prefix)
                span.record(call)
            calls.append(call)
            assert outcome.error is not None
            if isinstance(outcome.error, KeyboardInterrupt | ThreadlineError):
                raise outcome.error  # a cancel, a model error: already says what happened
            raise ModelCallFailed(call.id, outcome.error) from outcome.error
        spent += completion.usage.prompt_tokens + completion.usage.completion_tokens
        if not completion.tool_calls or request.tool_choice == "none":
            with engine.tracer.span(Step.COMMIT, "reply") as span:
                reply, call = commit_reply(store, head=head, branch=branch, request=request,
                                           outcome=outcome, model_id=model.model_id,
                                           clock=clock, prefix=prefix,
                                           release_lease=None if holding is None
                                           else holding.giving_back())
                span.record(call)
            if holding is not None:
                holding.gave_back()  # the reply's commit gave the lease back
            calls.append(call)
            return TurnResult(head.conversation_id, branch, message, reply, call,
                              tool_results=tuple(results))
        history = store.history(head.conversation_id, branch)
        taken = {i.content["call_id"] for i in history
                 if i.kind is ItemKind.TOOL_CALL and i.turn == message.turn}
        decided = call_items([(c.id, c.name, c.arguments) for c in completion.tool_calls],
                             taken)
        if completion.text:  # what the model said alongside its calls travels with them
            decided[0] = NewItem(decided[0].kind, {**decided[0].content,
                                                   "text": completion.text})
        with engine.tracer.span(Step.COMMIT, "tool_calls") as span:
            head, call = commit_reply(store, head=head, branch=branch, request=request,
                                      outcome=outcome, model_id=model.model_id, clock=clock,
                                      prefix=prefix, items=decided)
            span.record(call)
        calls.append(call)
        rounds += 1
        results += run_pending(engine, head.conversation_id, branch, holding)
        head = store.head(head.conversation_id, branch) or head


def pending_calls_of(store: Store, conversation_id: str, branch: str) -> list[Item]:
    """The open turn's recorded tool calls that have no result yet (a turn that died
    mid-loop)."""
    return _pending(store.history(conversation_id, branch))


def _pending(history: Sequence[Item]) -> list[Item]:
    message = open_turn(history)
    return [] if message is None else pending_calls(history, message)


def run_pending(engine: Responder, conversation_id: str, branch: str,
                holding: Holding | None) -> list[Item]:
    """Run the open turn's recorded tool calls that have no result yet, recording each
    result before the loop goes on; a replayed turn runs only these."""
    store = engine.store
    history = store.history(conversation_id, branch)
    pending = _pending(history)
    if not pending:
        return []

    def record(result: NewItem) -> Item:
        return append(store, conversation_id, branch, engine.clock(), result)[0]

    def before_side_effect() -> None:
        if holding is not None:
            holding.protect()  # a cancel asked for before now stops the turn here

    try:
        return execute_in_order(engine.toolbox, pending, history, branch,
                                before_side_effect=before_side_effect, record=record,
                                tracer=engine.tracer,
                                check=holding.check if holding is not None else _unwatched)
    except TurnCancelled:
        for call in _pending(store.history(conversation_id, branch)):  # each left: an answer
            record(not_run(call, "not run: a newer message cancelled this turn"))
        raise


def _unwatched() -> None:
    return None  # a turn in a new conversation: nothing else can cancel it


def previous(store: Store, conversation_id: str, branch: str) -> Previous | None:
    """The call a new one's prefix is measured against: the branch's last, else (the first
    call on a fork) the conversation's last. A failed call that recorded only its messages
    (``ModelCall.messages_only``) is passed over for the one before it: compared with a
    rendering or a payload, its bytes would name a miss that never happened."""
    last = _comparable_last(store, conversation_id, branch)
    same_branch = last is not None
    if last is None:
        last = _comparable_last(store, conversation_id, None)
    if last is None or last.request is None:
        return None
    found = PrefixReport.from_json(last.prefix) if last.prefix else None
    return Previous(last.id, last.request, () if found is None else found.layout,
                    same_branch, None if found is None else found.compaction_seq)


def _comparable_last(store: Store, conversation_id: str, branch: str | None) -> ModelCall | None:
    """The newest turn call on ``branch`` (any branch with None) that is not messages-only."""
    last = store.last_call(conversation_id, branch)
    if last is None or not last.messages_only:
        return last
    # only after a failure: the listing carries no requests, so older failures are read
    for listed in reversed(store.calls(conversation_id, branch=branch)):
        if listed.purpose != "turn" or listed.id == last.id:
            continue
        call = store.call(listed.id)
        if not call.messages_only:
            return call
    return None
