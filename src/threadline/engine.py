"""The engine: where the steps of a turn meet.

    run_turn:  ingest → assemble → call → commit

The user's message is durable before the model is called; a failed call is recorded and the
turn can be answered later (``answer``, or ``run_turn`` again with the same client message id)
without the message being written twice. Edits and regenerations fork a new branch and leave
the original intact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from threadline.cache.attribution import Previous, report
from threadline.cache.prefix import PrefixReport
from threadline.calls import ModelCall
from threadline.errors import (
    InputError,
    ModelCallFailed,
    ModelError,
    TurnSuperseded,
)
from threadline.items import Branch, Item, ItemKind, format_time, utc_now
from threadline.models.base import ModelBackend, OnText
from threadline.request import Request, TailBlock, ToolSpec
from threadline.settings import DEFAULT_MAX_MESSAGE_BYTES
from threadline.stores.base import MAIN, Commit, NewBranch, Store
from threadline.turn.assemble import MessageMemo, assemble
from threadline.turn.call import call_model
from threadline.turn.commit import commit_reply, record_failure, sent_request
from threadline.turn.ingest import ingest, validate_text


@dataclass(frozen=True)
class TurnResult:
    conversation_id: str
    branch: str
    message: Item
    reply: Item
    call: ModelCall
    deduplicated: bool = False  # True when a retried send returned the first result

    @property
    def turn(self) -> int:
        return self.message.turn

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id, "branch": self.branch, "turn": self.turn,
            "message_seq": self.message.seq, "reply_seq": self.reply.seq,
            "reply": self.reply.text, "call_id": self.call.id, "model": self.call.model,
            "usage": self.call.usage.to_json(), "timings": self.call.timings.to_json(),
            "deduplicated": self.deduplicated,
        }


class Engine:
    def __init__(self, store: Store, model: ModelBackend, *, system: str | None = None,
                 tools: Sequence[ToolSpec] = (),
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 time_in_context: bool = False,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.store = store
        self.model = model
        self.system = system
        self.tools = tuple(tools)
        self.max_message_bytes = max_message_bytes
        self.clock = clock
        self.time_in_context = time_in_context  # the current time, in the tail of each turn
        self._memo = MessageMemo()

    def run_turn(self, text: str, *, conversation_id: str | None = None, branch: str = MAIN,
                 client_msg_id: str | None = None, on_text: OnText | None = None) -> TurnResult:
        """Append the user's message, call the model on the branch, append its reply."""
        ingested = ingest(self.store, text, clock=self.clock, max_bytes=self.max_message_bytes,
                          conversation_id=conversation_id, branch=branch,
                          client_msg_id=client_msg_id, system=self.system)
        if ingested.reply is not None:
            return self._finished(ingested.message, ingested.reply)
        if not ingested.created:
            head = self.store.head(ingested.conversation_id, ingested.branch)
            if head is None or head.seq != ingested.message.seq:
                raise TurnSuperseded(ingested.conversation_id, ingested.branch,
                                     ingested.message.seq, None if head is None else head.seq)
        return self._respond(ingested.message, ingested.branch, on_text)

    def answer(self, conversation_id: str, branch: str = MAIN, *,
               on_text: OnText | None = None) -> TurnResult:
        """Answer the branch's newest message: a failed turn's retry, or a regeneration."""
        head = self.store.head(conversation_id, branch)
        if head is None or head.kind is not ItemKind.USER:
            raise InputError(f"branch {branch!r} of {conversation_id} does not end with an "
                             "unanswered user message; there is nothing to answer",
                             hint="send a new message instead")
        return self._respond(head, branch, on_text)

    def fork(self, conversation_id: str, from_seq: int | None, name: str | None = None) -> Branch:
        """A new branch growing from item ``from_seq``; the original stays as it is."""
        return fork(self.store, conversation_id, from_seq, name, clock=self.clock)

    def edit(self, conversation_id: str, seq: int, text: str, *,
             on_text: OnText | None = None) -> TurnResult:
        """Replace user message ``seq`` on a new branch, and answer it there."""
        original = self.store.item(conversation_id, seq)
        if original.kind is not ItemKind.USER:
            raise InputError(f"item {seq} is a {original.kind}, not a user message; only user "
                             "messages can be edited")
        validate_text(text, max_bytes=self.max_message_bytes)
        branch = self.fork(conversation_id, original.parent_seq)
        return self.run_turn(text, conversation_id=conversation_id, branch=branch.name,
                             on_text=on_text)

    def regenerate(self, conversation_id: str, seq: int, *,
                   on_text: OnText | None = None) -> TurnResult:
        """A new answer to the user message ``seq`` answered (or the reply ``seq``), on a
        new branch."""
        item = self.store.item(conversation_id, seq)
        if item.kind is ItemKind.ASSISTANT and item.parent_seq is not None:
            item = self.store.item(conversation_id, item.parent_seq)
        if item.kind is not ItemKind.USER:
            raise InputError(f"item {seq} is a {item.kind}; regenerate takes a user message or "
                             "the assistant reply to one")
        branch = self.fork(conversation_id, item.seq)
        return self.answer(conversation_id, branch.name, on_text=on_text)

    def request_for(self, conversation_id: str, branch: str = MAIN) -> Request:
        """The request the next call on a branch would send. Assembly is pure; the clock is read
        here, at the edge, and only when the time goes into the context (in the tail)."""
        conversation = self.store.conversation(conversation_id)
        tail = [TailBlock("current time", format_time(self.clock()))] \
            if self.time_in_context else []
        return assemble(self.store.history(conversation_id, branch),
                        system=conversation.system, tools=self.tools, tail=tail,
                        memo=self._memo)

    # -- steps ---------------------------------------------------------------------------

    def _respond(self, head: Item, branch: str, on_text: OnText | None) -> TurnResult:
        request = self.request_for(head.conversation_id, branch)
        outcome = call_model(self.model, request, clock=self.clock, on_text=on_text)
        sent = sent_request(request, outcome, self.model.model_id)
        prefix = report(sent, request, self._previous(head.conversation_id, branch)).to_json()
        if outcome.completion is None:
            call = record_failure(self.store, head=head, branch=branch, request=request,
                                  outcome=outcome, model_id=self.model.model_id,
                                  clock=self.clock, prefix=prefix)
            assert outcome.error is not None
            if isinstance(outcome.error, KeyboardInterrupt):
                raise outcome.error
            if isinstance(outcome.error, ModelError):
                raise outcome.error
            raise ModelCallFailed(call.id, outcome.error) from outcome.error
        reply, call = commit_reply(self.store, head=head, branch=branch, request=request,
                                   outcome=outcome, model_id=self.model.model_id,
                                   clock=self.clock, prefix=prefix)
        return TurnResult(head.conversation_id, branch, head, reply, call)

    def _previous(self, conversation_id: str, branch: str) -> Previous | None:
        """The call this one's prefix is measured against: the branch's last, else (the first
        call on a fork) the conversation's last."""
        last = self.store.last_call(conversation_id, branch)
        same_branch = last is not None
        if last is None:
            last = self.store.last_call(conversation_id)
        if last is None or last.request is None:
            return None
        layout = PrefixReport.from_json(last.prefix).layout if last.prefix else ()
        return Previous(last.id, last.request, layout, same_branch)

    def _finished(self, message: Item, reply: Item) -> TurnResult:
        call = next((c for c in self.store.calls(message.conversation_id)
                     if c.reply_seq == reply.seq), None)
        if call is None:  # an imported reply was never produced by a call
            raise InputError(f"message {message.seq} was answered without a recorded call")
        return TurnResult(message.conversation_id, reply.branch, message, reply,
                          self.store.call(call.id), deduplicated=True)


def fork(store: Store, conversation_id: str, from_seq: int | None, name: str | None = None,
         *, clock: Callable[[], datetime] = utc_now) -> Branch:
    """Create a branch growing from item ``from_seq`` (named b2, b3, … unless ``name``).
    With ``from_seq`` None the branch starts empty: a new root in the same conversation."""
    for _ in range(3):
        branch_name = name or f"b{len(store.branches(conversation_id)) + 1}"
        if from_seq is not None:
            store.item(conversation_id, from_seq)  # raises UnknownItem
        try:
            result = store.commit(Commit(
                conversation_id=conversation_id, created_at=clock(), branch=branch_name,
                fork=NewBranch(branch_name, from_seq), expected_head=from_seq))
        except InputError:
            if name is not None:
                raise
            continue  # a concurrent fork took the generated name
        assert result.branch is not None
        return result.branch
    raise InputError("could not choose a free branch name", hint="pass a name")
