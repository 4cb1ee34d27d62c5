"""The engine: where the steps of a turn meet.

    run_turn:  check → lease → gather context → ingest → record context → call ⇄ tools
               → commit → hooks

The user's message is durable before the model is called; a failed call is recorded and the
turn can be answered later (``answer``, or ``run_turn`` again with the same client message id)
without the message being written twice. Edits and regenerations fork a new branch and leave
the original intact.

The engine knows no feature: what a turn is shown besides its conversation comes from context
providers (``turn/providers.py``), what follows a turn from turn hooks (``turn/hooks.py``),
and when to compact from a compactor (``turn/compactor.py``), each handed in by whoever builds
the engine (``threadline.standard_engine`` wires threadline's own). Lease waits, refusals and
cancels, compactions and every error a turn raises are reported to an observer
(``turn/observe.py``), and each step of a turn (ingest, each provider, each model call, each
tool call, each commit) runs in a span of its tracer (``turn/trace.py``), for telemetry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from functools import lru_cache, partial

from threadline.calls import ModelCall
from threadline.errors import InputError, TurnSuperseded
from threadline.items import (
    Branch,
    Item,
    ItemKind,
    is_empty_user_message,
    new_id,
    utc_now,
    validate_text,
)
from threadline.models.base import ModelBackend, OnText
from threadline.plugin import Assemble
from threadline.render.openai import prompt_cache_key
from threadline.request import Request, ToolSpec
from threadline.settings import DEFAULT_MAX_MESSAGE_BYTES
from threadline.stores.base import MAIN, Commit, LeaseTaken, NewConversation, Store
from threadline.turn.assemble import MessageMemo, assemble
from threadline.turn.commit import commit_served
from threadline.turn.compactor import Compactor
from threadline.turn.delegate import Agent, Delegated, Delegation
from threadline.turn.delegator import Delegator
from threadline.turn.fork import fork
from threadline.turn.hooks import TurnEvent, TurnHook, run_hooks
from threadline.turn.ingest import Ingested, ingest, retried
from threadline.turn.input import TurnInput, turn_input
from threadline.turn.lease import DEFAULT_LEASE, Holding, LeasePolicy, hold, watched
from threadline.turn.observe import Observer, guarded
from threadline.turn.providers import (
    ContextProvider,
    Found,
    Gathered,
    Gathering,
    branch_before,
    check_turn,
    gather,
    items_before,
    record_found,
)
from threadline.turn.respond import pending_calls_of, respond, run_pending
from threadline.turn.result import TurnResult, finished
from threadline.turn.tools import Tool, Toolbox, ToolLimits, open_turn
from threadline.turn.trace import Step, Tracer
from threadline.turn.trace import guarded as guarded_tracer

__all__ = ["Engine", "TurnResult"]


class Engine:
    def __init__(self, store: Store, model: ModelBackend, *, system: str | None = None,
                 tools: Sequence[Tool | ToolSpec] = (), tool_limits: ToolLimits | None = None,
                 providers: Sequence[ContextProvider] = (), hooks: Sequence[TurnHook] = (),
                 compactor: Compactor | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 lease: LeasePolicy = DEFAULT_LEASE, count: Callable[[str], int] | None = None,
                 observer: Observer | None = None, tracer: Tracer | None = None,
                 clock: Callable[[], datetime] = utc_now, agents: Sequence[Agent] = (),
                 delegation: Delegation | None = None) -> None:
        self.store, self.model, self.system = store, model, system
        # sub-agents (turn/delegate.py): offered to conversations whose metadata allows it;
        # ``delegation``: the limits this engine gives the conversations it starts
        self.delegator = Delegator(self, agents, self._child_engine)
        if delegation is not None and not agents:
            raise InputError("delegation limits were given, but no agents to delegate to",
                             hint="pass agents=[Agent(...)], or leave delegation out")
        self.delegation = delegation
        self.toolbox = Toolbox([*tools, *self.delegator.tools],  # the tool loop's harness
                               tool_limits or ToolLimits())
        # what every conversation's requests offer (the delegation tools: only where allowed)
        self.tools = self.toolbox.specs[:len(tools)]
        self._children: dict[str, Engine] = {}
        names = [p.name for p in providers]
        if len(set(names)) != len(names):
            raise InputError(f"two context providers share a name: {', '.join(names)}")
        self.providers, self.hooks = tuple(providers), tuple(hooks)
        self.compactor = compactor  # when to compact on its own (None: never)
        self.max_message_bytes = max_message_bytes
        self.lease = lease  # one turn at a time per conversation, and what a second one does
        self.clock = clock
        self.observer = guarded(observer)  # told of lease waits, compactions and errors
        self.tracer = guarded_tracer(tracer)  # a span around each step of a turn
        self.count: Callable[[str], int] = lru_cache(maxsize=65_536)(count or model.count_tokens)
        self.model_lock = threading.Lock()  # one backend instance runs one call at a time
        self._memo = MessageMemo()
        self._hooks_args = (compactor, hooks, observer, tracer)

    def run_turn(self, turn: TurnInput | str, *, on_text: OnText | None = None,
                 conversation_id: str | None = None, branch: str = MAIN,
                 client_msg_id: str | None = None, on_busy: str | None = None,
                 user_id: str | None = None, options: Iterable[object] = ()) -> TurnResult:
        """Append the user's message, call the model on the branch, append its reply. ``turn``
        is a :class:`TurnInput`, or the text with its fields as keywords. In an existing
        conversation the turn holds its lease (see ``turn/lease.py``). Each context provider
        adds what it finds to the turn's tail; each hook runs once the turn is committed."""
        started = time.perf_counter()
        with self.tracer.span(Step.TURN) as span:
            try:
                turn = turn_input(turn, conversation_id=conversation_id, branch=branch,
                                  client_msg_id=client_msg_id, on_busy=on_busy,
                                  user_id=user_id, options=options)
                span.record(turn)
                result = self._run_turn(turn, on_text, started)
            except Exception as err:
                self.observer.turn_raised(err)
                raise
            span.record(result)
            return result

    def _run_turn(self, turn: TurnInput, on_text: OnText | None, started: float
                  ) -> TurnResult:
        if turn.text is None:
            raise InputError("a turn needs the user's message",
                             hint="to answer the branch's newest message, use answer()")
        validate_text(turn.text, max_bytes=self.max_message_bytes)  # refused before any wait
        self._check(turn)
        if turn.conversation_id is None:  # a new conversation: nobody else can be answering it
            return self._turn(turn, turn.text, on_text, None, started)
        # unknown ids fail before any wait; a turn that died mid-loop left calls to run first
        pending = pending_calls_of(self.store, turn.conversation_id, turn.branch)
        with self._hold(turn) as holding:
            return self._turn(turn, turn.text, watched(on_text, holding), holding, started,
                              pending=bool(pending))

    def answer(self, turn: TurnInput | str, branch: str = MAIN, *,
               on_text: OnText | None = None) -> TurnResult:
        """Answer the branch's newest message: a failed turn's retry, or a regeneration.
        ``turn`` is the conversation id, or a :class:`TurnInput` naming it (and no text).
        Like a turn, it holds the conversation's lease (waiting for it if need be)."""
        started = time.perf_counter()
        turn = turn if isinstance(turn, TurnInput) else TurnInput(conversation_id=turn,
                                                                  branch=branch)
        with self.tracer.span(Step.TURN, "", turn) as span:
            try:
                result = self._answer(turn, on_text, started)
            except Exception as err:
                self.observer.turn_raised(err)
                raise
            span.record(result)
            return result

    def _answer(self, turn: TurnInput, on_text: OnText | None, started: float) -> TurnResult:
        if turn.conversation_id is None or turn.text is not None:
            raise InputError("answer() takes a conversation and no text: it answers the "
                             "branch's newest message", hint="send new text with run_turn()")
        self._check(turn)
        cid = turn.conversation_id
        with self._hold(turn) as holding:
            holding.take()  # it writes no message to take the lease with
            run_pending(self, cid, turn.branch, holding)
            history = self.store.history(cid, turn.branch)
            message = open_turn(history)
            if message is None:
                raise InputError(f"branch {turn.branch!r} of {cid} does not end with an "
                                 "unanswered user message; there is nothing to answer",
                                 hint="send a new message instead")
            _refuse_empty(message)
            found = Gathering(turn, message.text, self, lambda: items_before(history, message))
            recorded = record_found(self.store, message, turn.branch,
                                    gather(self.providers, found, message, self.tracer),
                                    self.clock)
            return self._complete(found, message, history[-1], recorded,
                                  watched(on_text, holding), holding, started)

    def edit(self, conversation_id: str, seq: int, turn: TurnInput | str, *,
             on_text: OnText | None = None) -> TurnResult:
        """Replace user message ``seq`` on a new branch, and answer it there (``turn``: the new
        text, or a TurnInput with it)."""
        turn = turn_input(turn)
        original = self.store.item(conversation_id, seq)
        if original.kind is not ItemKind.USER:
            raise InputError(f"item {seq} is a {original.kind}, not a user message; only user "
                             "messages can be edited")
        if turn.text is None:
            raise InputError("an edit needs the new text")
        validate_text(turn.text, max_bytes=self.max_message_bytes)
        self._check(turn)  # before the fork: an edit that will be refused forks nothing
        branch = self.fork(conversation_id, original.parent_seq)
        return self.run_turn(turn.at(conversation_id, branch.name), on_text=on_text)

    def regenerate(self, conversation_id: str, seq: int, turn: TurnInput | None = None, *,
                   on_text: OnText | None = None) -> TurnResult:
        """A new answer to the user message ``seq`` answered (or the reply ``seq``), on a
        new branch; ``turn`` carries its per-turn options (no text: the message stays)."""
        turn = turn or TurnInput()
        item = self.store.item(conversation_id, seq)
        if item.kind is ItemKind.ASSISTANT and item.parent_seq is not None:
            item = self.store.item(conversation_id, item.parent_seq)
        if item.kind is not ItemKind.USER:
            raise InputError(f"item {seq} is a {item.kind}; regenerate takes a user message or "
                             "the assistant reply to one")
        _refuse_empty(item)  # before the fork: nothing to answer, so nothing is forked
        if turn.text is not None:
            raise InputError("regenerate answers the same message again",
                             hint="to change the message, use edit()")
        self._check(turn)
        branch = self.fork(conversation_id, item.seq)
        return self.answer(turn.at(conversation_id, branch.name), on_text=on_text)

    def fork(self, conversation_id: str, from_seq: int | None, name: str | None = None) -> Branch:
        """A new branch growing from item ``from_seq``; the original stays as it is."""
        return fork(self.store, conversation_id, from_seq, name, clock=self.clock)

    def item(self, conversation_id: str, seq: int) -> Item:
        """A log item verbatim, whatever compaction did to it in the context."""
        return self.store.item(conversation_id, seq)

    def delegate(self, conversation_id: str, task: str, *, agent: str, branch: str = MAIN,
                 client_msg_id: str | None = None, on_text: OnText | None = None
                 ) -> Delegated:
        """Run ``task`` in a new child conversation of ``agent``, linked to the branch's
        newest turn, and return its answer with what it cost. Sending the same
        ``client_msg_id`` again returns the first delegation's answer."""
        validate_text(task, max_bytes=self.max_message_bytes)
        return self.delegator.delegate(conversation_id, task, agent, branch=branch,
                                       client_msg_id=client_msg_id, on_text=on_text)

    def new_conversation(self, *, system: str | None = None, title: str | None = None,
                         owner: str | None = None, delegation: Delegation | None = None
                         ) -> str:
        """Start an empty conversation and return its id (its first turn: ``run_turn``).
        ``delegation`` lets its turns delegate to this engine's agents (default: the
        engine's own setting; off unless it has one)."""
        cid = new_id("c_")
        self.store.commit(Commit(conversation_id=cid, created_at=self.clock(),
                                 expected_head=None, create=NewConversation(
                                     cid, title=title, system=system or self.system,
                                     owner=owner,
                                     metadata=self._new_metadata(delegation))))
        return cid

    def request_for(self, conversation_id: str, branch: str = MAIN) -> Request:
        """The request the next call on a branch would send."""
        return self.assembler(conversation_id, branch)(
            self.store.history(conversation_id, branch))

    def assembler(self, conversation_id: str, branch: str = MAIN) -> Assemble:
        """This engine's assembly for a conversation branch, as a function of its items: pure,
        with each provider's tail blocks (rendered from what it recorded) after the history.
        The conversation's settings are those its history read brought (they never change)."""
        conversation = self.store.conversation(conversation_id, as_read=True)
        system = conversation.system
        # a child shares its siblings' key (their requests begin alike)
        cache_key = conversation.metadata.get("prompt_cache_key") or prompt_cache_key(
            conversation_id, branch)
        tools = (*self.tools, *self.delegator.offered(conversation))
        providers = self.providers

        def assemble_for(history: Sequence[Item]) -> Request:
            tail = [block for provider in providers for block in provider.render(history)]
            return assemble(history, system=system, tools=tools, tail=tail,
                            memo=self._memo, cache_key=cache_key)
        return assemble_for

    # -- steps ---------------------------------------------------------------------------

    def _new_metadata(self, delegation: Delegation | None = None) -> dict[str, object]:
        limits = delegation or self.delegation
        return {} if limits is None else {"delegation": limits.to_json()}

    def _child_engine(self, agent: Agent) -> Engine:
        """The engine that runs ``agent``'s tasks: this one's store, model (and its lock),
        hooks, compactor, lease policy and observers, the agent's prompt, tools and budget."""
        child = self._children.get(agent.name)
        if child is None:
            compactor, hooks, observer, tracer = self._hooks_args
            child = Engine(self.store, self.model, system=agent.system, tools=agent.tools,
                           tool_limits=agent.limits, hooks=hooks, compactor=compactor,
                           max_message_bytes=self.max_message_bytes, lease=self.lease,
                           count=self.count, observer=observer, tracer=tracer,
                           clock=self.clock, agents=tuple(self.delegator.agents.values()))
            child.model_lock = self.model_lock  # one backend instance, one call at a time
            child = self._children.setdefault(agent.name, child)  # parallel children race
        return child

    def _check(self, turn: TurnInput) -> None:
        """Refuse what no part of this engine can do, before anything waits or is written."""
        check_turn(turn, self.providers, users=any(h.uses_user for h in self.hooks))

    def _hold(self, turn: TurnInput) -> AbstractContextManager[Holding]:
        assert turn.conversation_id is not None
        policy = self.lease if turn.on_busy is None else replace(self.lease,
                                                                 on_busy=turn.on_busy)
        return hold(self.store, turn.conversation_id, policy, observer=self.observer)

    def _turn(self, turn: TurnInput, text: str, on_text: OnText | None,
              holding: Holding | None, started: float, *, pending: bool = False
              ) -> TurnResult:
        cid, branch = turn.conversation_id, turn.branch
        if pending and cid is not None:
            self._run_pending(cid, branch, holding)
        ingested, found, gathered = self._ingest(turn, text, holding)
        if ingested.reply is not None:  # the first send of a retried message was answered
            return finished(self.store, ingested.message, ingested.reply)
        found.turn = turn.at(ingested.conversation_id, ingested.branch)
        if ingested.created:  # what the providers found went in with the message
            recorded = list(zip([p for p, _ in gathered], ingested.context, strict=True))
            return self._complete(found, ingested.message, ingested.message, recorded, on_text,
                                  holding, started)
        head = self.store.head(ingested.conversation_id, ingested.branch) or ingested.message
        recorded = record_found(self.store, ingested.message, found.turn.branch, gathered,
                                self.clock)
        return self._complete(found, ingested.message, head, recorded, on_text, holding,
                              started, retry=True)

    def _run_pending(self, cid: str, branch: str, holding: Holding | None) -> None:
        """A turn that died mid-loop: its decided calls run first, under the lease."""
        if holding is not None:
            holding.take()
        run_pending(self, cid, branch, holding)

    def _ingest(self, turn: TurnInput, text: str, holding: Holding | None
                ) -> tuple[Ingested, Gathering, Gathered]:
        """Gather the turn's context, then commit the message, the context and the lease
        together; if another turn took the lease meanwhile, wait for it and gather again."""
        cid, branch = turn.conversation_id, turn.branch
        while True:
            seen = retried(self.store, text, conversation_id=cid, branch=branch,
                           client_msg_id=turn.client_msg_id)
            first = None if seen is None else seen.message
            found = Gathering(turn, text, self,
                              partial(branch_before, self.store, cid, branch, first))
            if seen is not None and seen.reply is not None:
                return seen, found, []
            if seen is not None and holding is not None and not holding.held:
                holding.take()  # a retry writes no message to take the lease with; under
                continue        # it, look again: the turn it waited for may have answered
            gathered = gather(self.providers, found, first, self.tracer)
            if seen is not None:
                return seen, found, gathered
            try:
                with self.tracer.span(Step.INGEST) as span:
                    ingested = ingest(self.store, text, clock=self.clock,
                                      max_bytes=self.max_message_bytes, conversation_id=cid,
                                      branch=branch, client_msg_id=turn.client_msg_id,
                                      system=self.system, context=[i for _, i in gathered],
                                      metadata=self._new_metadata(),
                                      lease=None if holding is None else holding.claim(),
                                      follows=turn.follows)
                    span.record(ingested.message)
            except LeaseTaken:
                assert holding is not None and cid is not None
                holding.wait()  # another turn began meanwhile: after it, look again
                if pending_calls_of(self.store, cid, branch):  # it died mid-loop
                    self._run_pending(cid, branch, holding)
                continue
            if holding is not None:  # taken by the commit, or (a concurrent retry won) now
                holding.took() if ingested.created else holding.take()
            return ingested, found, gathered

    def _complete(self, found: Gathering, message: Item, head: Item, recorded: Found,
                  on_text: OnText | None, holding: Holding | None, started: float, *,
                  retry: bool = False) -> TurnResult:
        """Answer ``message`` (after it: what the providers found, ``recorded``): served by a
        provider, or by the model; then run the hooks."""
        branch = found.turn.branch
        if recorded:
            head = recorded[-1][1]
        if retry and head.turn != message.turn:  # the retried message is no longer open
            raise TurnSuperseded(message.conversation_id, branch, message.seq, head.seq)
        calls: list[ModelCall] = []
        try:
            result = self._serve(found, message, head, recorded, calls, holding) or respond(
                self, message, branch, on_text, head=head, holding=holding, calls=calls)
        except Exception as err:
            run_hooks(self.hooks, TurnEvent(self.store, found.turn, message, calls=calls,
                                            error=err, elapsed_s=time.perf_counter() - started),
                      clock=self.clock)
            raise
        run_hooks(self.hooks, TurnEvent(self.store, found.turn, message, calls=calls,
                                        result=result, elapsed_s=time.perf_counter() - started),
                  clock=self.clock)
        return result

    def _serve(self, found: Gathering, message: Item, head: Item, recorded: Found,
               calls: list[ModelCall], holding: Holding | None) -> TurnResult | None:
        """The turn answered by a provider (an answer given before), with no model call."""
        for provider, item in recorded:
            served = provider.serve(item, found)
            if served is None:
                continue
            with self.tracer.span(Step.COMMIT, "served") as span:
                reply = commit_served(self.store, served, head=head,
                                      branch=found.turn.branch, clock=self.clock,
                                      release_lease=None if holding is None
                                      else holding.giving_back())
                span.record(reply)
            if holding is not None:
                holding.gave_back()
            call = self.store.call(served.call_id)
            calls.append(call)
            return TurnResult(message.conversation_id, found.turn.branch, message, reply, call)
        return None


def _refuse_empty(message: Item) -> None:
    if is_empty_user_message(message):
        raise InputError(f"user message {message.seq} of {message.conversation_id} is empty "
                         "(an imported transcript's, kept as it was); there is nothing to answer",
                         hint=f"send a new message, or edit item {message.seq} to give it text")
