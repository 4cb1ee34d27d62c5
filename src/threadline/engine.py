"""The engine: where the steps of a turn meet.

    run_turn:  ingest → assemble → call → commit

The user's message is durable before the model is called; a failed call is recorded and the
turn can be answered later (``answer``, or ``run_turn`` again with the same client message id)
without the message being written twice. Edits and regenerations fork a new branch and leave
the original intact.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from threadline.cache.attribution import Previous, report
from threadline.cache.prefix import PrefixReport
from threadline.calls import ModelCall
from threadline.compaction.boundary import starts_new_task
from threadline.compaction.compact import AssembleFor, Compacted, compact, unanswered
from threadline.compaction.constraints import Constraint, active, new_constraint, removal
from threadline.compaction.extract import extract
from threadline.compaction.plan import Count, Policy, request_tokens, word_count
from threadline.compaction.working_state import WorkingState, state_item, state_of, update
from threadline.errors import (
    InputError,
    ModelCallFailed,
    ThreadlineError,
    TurnCancelled,
    TurnSuperseded,
)
from threadline.items import Branch, Item, ItemKind, NewItem, format_time, utc_now
from threadline.memory.recall import MemoryRecall
from threadline.memory.store import user_id_checked
from threadline.memory.writer import enqueue
from threadline.models.base import ModelBackend, OnText
from threadline.models.calling import call_model, sent_request
from threadline.render.openai import prompt_cache_key
from threadline.request import Request, TailBlock, ToolSpec
from threadline.retrieval.cache import AnswerCache, CachedAnswer
from threadline.retrieval.corpus import Corpus
from threadline.rewrite import (
    DEFAULT_DEADLINE_S,
    DETERMINISTIC,
    Rewriter,
    RewriteResult,
    race,
)
from threadline.rewrite.deterministic import turns_of
from threadline.rewrite.model import model_rewriter
from threadline.settings import DEFAULT_MAX_MESSAGE_BYTES
from threadline.stores.base import MAIN, Commit, NewBranch, Store
from threadline.stores.relational import RelationalStore
from threadline.turn.assemble import MessageMemo, assemble
from threadline.turn.commit import commit_reply, record_failure
from threadline.turn.ingest import ingest, validate_text
from threadline.turn.lease import DEFAULT_LEASE, Holding, LeasePolicy, hold
from threadline.turn.recall import recall
from threadline.turn.retrieve import recorded_for, retrieve
from threadline.turn.tools import (
    Tool,
    Toolbox,
    ToolLimits,
    call_items,
    execute_in_order,
    not_run,
    open_turn,
    pending_calls,
)


@dataclass(frozen=True)
class TurnResult:
    conversation_id: str
    branch: str
    message: Item
    reply: Item
    call: ModelCall
    deduplicated: bool = False  # True when a retried send returned the first result
    tool_results: tuple[Item, ...] = ()  # what the turn's tool calls returned, in order

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
            "cached": self.reply.content.get("cached"),
            "tool_calls": [{"call_id": r.content["call_id"], "tool": r.content.get("tool"),
                            "is_error": r.content.get("is_error", False), "result_seq": r.seq}
                           for r in self.tool_results],
        }


class Engine:
    def __init__(self, store: Store, model: ModelBackend, *, system: str | None = None,
                 tools: Sequence[Tool | ToolSpec] = (), tool_limits: ToolLimits | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 time_in_context: bool = False,
                 policy: Policy | None = None, count: Count | None = None,
                 model_extraction: bool = False, lease: LeasePolicy = DEFAULT_LEASE,
                 corpora: Corpus | None = None, memory: MemoryRecall | None = None,
                 rewrite_deadline_s: float = DEFAULT_DEADLINE_S,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.store = store
        self.model = model
        self.system = system
        self.toolbox = Toolbox(tools, tool_limits or ToolLimits())  # the tool loop's harness
        self.corpora = corpora  # what run_turn(corpus=...) searches
        self.memory = memory  # what run_turn(user_id=...) recalls from
        self.rewrite_deadline_s = rewrite_deadline_s
        self.tools = self.toolbox.specs
        self.max_message_bytes = max_message_bytes
        self.clock = clock
        self.time_in_context = time_in_context  # the current time, in the tail of each turn
        self.policy = policy  # when to compact on its own (None: only when asked)
        self.model_extraction = model_extraction  # the model also looks for constraints
        self.lease = lease  # one turn at a time per conversation, and what a second one does
        # tokens as the model counts them, where it can say; words otherwise
        count = count or getattr(model, "count_tokens", None) or word_count
        self.count: Count = lru_cache(maxsize=65_536)(count)
        self._memo = MessageMemo()
        self._model_lock = threading.Lock()

    def run_turn(self, text: str, *, conversation_id: str | None = None, branch: str = MAIN,
                 client_msg_id: str | None = None, on_text: OnText | None = None,
                 on_busy: str | None = None, corpus: str | None = None,
                 cache: bool = False, user_id: str | None = None) -> TurnResult:
        """Append the user's message, call the model on the branch, append its reply. In an
        existing conversation the turn holds its lease; ``on_busy`` (queue, reject, cancel;
        default: the engine's) says what to do while another turn holds it. With ``corpus``
        the message is rewritten into a standalone query first and the passages it finds
        there are shown to the model, to cite by id; with ``cache`` too, an answer given
        before to the same question finding the same passages is served again (see
        ``retrieval.cache``) instead of calling the model. With ``user_id``, the message is
        queued for the memory writer (``memory.writer``), which learns from it later, and if
        the engine has ``memory``, what is remembered about the user that bears on the message
        is recalled into the turn's tail, with its provenance."""
        if user_id is not None:
            user_id_checked(user_id)  # refused before anything is written
        result = self._run_turn(text, conversation_id, branch, client_msg_id, on_text, on_busy,
                                corpus, cache, user_id)
        if user_id is not None and isinstance(self.store, RelationalStore):
            # the tool results too: the writer's policy decides, and its decisions are kept
            for item in (result.message, *result.tool_results):
                enqueue(self.store, item, user_id)
        return result

    def _run_turn(self, text: str, conversation_id: str | None, branch: str,
                  client_msg_id: str | None, on_text: OnText | None, on_busy: str | None,
                  corpus: str | None, cache: bool, user_id: str | None) -> TurnResult:
        if corpus is not None and self.corpora is None:
            raise InputError("this engine has no corpus to search",
                             hint="create the engine with corpora=Corpus(store)")
        if conversation_id is None:  # a new conversation: nobody else can be answering it
            return self._turn(text, None, branch, client_msg_id, on_text, None, corpus, cache,
                              user_id)
        validate_text(text, max_bytes=self.max_message_bytes)  # refused before any wait
        self.store.head(conversation_id, branch)  # unknown ids fail before any wait
        policy = self.lease if on_busy is None else replace(self.lease, on_busy=on_busy)
        with hold(self.store, conversation_id, policy) as holding:
            return self._turn(text, conversation_id, branch, client_msg_id, on_text, holding,
                              corpus, cache, user_id)

    def _turn(self, text: str, conversation_id: str | None, branch: str,
              client_msg_id: str | None, on_text: OnText | None,
              holding: Holding | None, corpus: str | None = None,
              cache: bool = False, user_id: str | None = None) -> TurnResult:
        if conversation_id is not None:  # a turn that died mid-loop: its decided calls run
            self._run_pending(conversation_id, branch, holding)
        found = None
        if corpus is not None:  # before anything is written: a query can be refused
            assert self.corpora is not None
            validate_text(text, max_bytes=self.max_message_bytes)
            history = [] if conversation_id is None else \
                self.store.history(conversation_id, branch)
            found = retrieve(self.corpora, corpus, history, text, rewriters=self._rewriters(),
                             deadline_s=self.rewrite_deadline_s)
        passages = [] if found is None else [p["id"] for p in found.content["passages"]]
        cached = None
        if cache and corpus is not None and passages and found is not None:
            cached = AnswerCache(self._corpora()).find(corpus, found.content["query"],
                                                       passages)
            found = NewItem(found.kind, {**found.content, "cache": cached.to_json()}) \
                if cached is not None else found
        ingested = ingest(self.store, text, clock=self.clock, max_bytes=self.max_message_bytes,
                          conversation_id=conversation_id, branch=branch,
                          client_msg_id=client_msg_id, system=self.system)
        if ingested.reply is not None:
            return self._finished(ingested.message, ingested.reply)
        head = self._record_context(ingested.message, ingested.branch, found, user_id)
        if not ingested.created:
            head = self.store.head(ingested.conversation_id, ingested.branch)
            # the retried message is still the open turn (perhaps with tool calls after it)
            if head is None or head.turn != ingested.message.turn:
                raise TurnSuperseded(ingested.conversation_id, ingested.branch,
                                     ingested.message.seq, None if head is None else head.seq)
        if cached is not None:
            return self._serve_cached(ingested.message, ingested.branch, head, cached)
        if holding is not None:
            on_text = _checked(on_text, holding)
        result = self._respond(ingested.message, ingested.branch, on_text, head=head,
                               holding=holding)
        if cache and corpus is not None and passages and found is not None:
            AnswerCache(self._corpora()).put(
                corpus, found.content["query"], passages, result.reply.text,
                conversation_id=result.conversation_id, reply_seq=result.reply.seq,
                call_id=result.call.id)
        return result

    def _record_context(self, message: Item, branch: str, found: NewItem | None,
                        user_id: str | None) -> Item | None:
        """Record what the turn retrieved and recalled after its message (once: a retried
        message keeps what its first try recorded); the new head, if anything was."""
        recalling = user_id is not None and self.memory is not None
        if found is None and not recalling:
            return None  # the common turn: nothing to record, no history to read
        history = self.store.history(message.conversation_id, branch)
        items = []
        if found is not None and recorded_for(history, message, ItemKind.RETRIEVAL) is None:
            items.append(found)
        if recalling and recorded_for(history, message, ItemKind.RECALL) is None:
            assert user_id is not None and self.memory is not None
            before = next(i for i in range(len(history) - 1, -1, -1)  # the message is near
                          if history[i].seq == message.seq)             # the end: look back
            items.append(recall(self.memory, user_id, history[:before], message.text,
                                deadline_s=self.rewrite_deadline_s,
                                query=None if found is None else found.content["query"]))
        if not items:
            return None
        return self.store.commit(Commit(
            conversation_id=message.conversation_id, branch=branch, created_at=self.clock(),
            check_head=False, items=items)).items[-1]

    def _corpora(self) -> Corpus:
        assert self.corpora is not None
        return self.corpora

    def _serve_cached(self, message: Item, branch: str, head: Item | None,
                      cached: CachedAnswer) -> TurnResult:
        """Answer ``message`` with a cached answer: a reply item that says where it came
        from, and the call that produced it; no model call."""
        head = head or message
        reply = self.store.commit(Commit(
            conversation_id=message.conversation_id, created_at=self.clock(), branch=branch,
            expected_head=head.seq, items=[NewItem(ItemKind.ASSISTANT, {
                "text": cached.answer, "cached": cached.to_json()})])).items[0]
        return TurnResult(message.conversation_id, branch, message, reply,
                          self.store.call(cached.call_id))

    def answer(self, conversation_id: str, branch: str = MAIN, *,
               on_text: OnText | None = None) -> TurnResult:
        """Answer the branch's newest message: a failed turn's retry, or a regeneration.
        Like a turn, it holds the conversation's lease (waiting for it if need be)."""
        with hold(self.store, conversation_id, self.lease) as holding:
            self._run_pending(conversation_id, branch, holding)
            head = self.store.head(conversation_id, branch)
            message = open_turn(self.store.history(conversation_id, branch))
            if head is None or message is None:
                raise InputError(f"branch {branch!r} of {conversation_id} does not end with "
                                 "an unanswered user message; there is nothing to answer",
                                 hint="send a new message instead")
            return self._respond(message, branch, _checked(on_text, holding), head=head,
                                 holding=holding)

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
        """The request the next call on a branch would send."""
        return self.assembler(conversation_id, branch)(
            self.store.history(conversation_id, branch))

    def assembler(self, conversation_id: str, branch: str = MAIN) -> AssembleFor:
        """This engine's assembly for a conversation branch, as a function of its items.
        Assembly is pure; the clock is read here, at the edge, and only when the time goes
        into the context (in the tail)."""
        system = self.store.conversation(conversation_id).system
        tail = [TailBlock("current time", format_time(self.clock()))] \
            if self.time_in_context else []
        cache_key = prompt_cache_key(conversation_id, branch)

        def assemble_for(history: Sequence[Item]) -> Request:
            return assemble(history, system=system, tools=self.tools, tail=tail,
                            memo=self._memo, cache_key=cache_key)
        return assemble_for

    # -- rewriting ------------------------------------------------------------------------

    def rewrite(self, conversation_id: str, text: str, branch: str = MAIN, *,
                deadline_s: float = DEFAULT_DEADLINE_S, use_model: bool = True) -> RewriteResult:
        """``text`` as a standalone query given the branch's conversation: the deterministic
        rewriter raced with this engine's model (unless ``use_model`` is False); the raw text
        if neither gives a valid rewrite within ``deadline_s``."""
        validate_text(text, max_bytes=self.max_message_bytes)
        return race(self._rewriters(use_model),
                    turns_of(self.store.history(conversation_id, branch)), text,
                    deadline_s=deadline_s)

    def _rewriters(self, use_model: bool = True) -> list[Rewriter]:
        if not use_model:
            return [DETERMINISTIC]
        return [DETERMINISTIC, model_rewriter(self.model, self._model_lock)]

    # -- compaction and constraints ------------------------------------------------------

    def compact(self, conversation_id: str, branch: str = MAIN, *, budget: int | None = None,
                strategy: str | None = None, dry_run: bool = False,
                boundary: bool = False) -> Compacted:
        """Compact a branch now (the lightest strategy that reaches ``budget`` tokens), or with
        ``dry_run`` only say what that would do and cost. ``boundary``: a task just ended, so
        summarise everything up to the last completed turn."""
        return compact(self.store, conversation_id, branch,
                       assemble_for=self.assembler(conversation_id, branch), count=self.count,
                       policy=self.policy or Policy(), clock=self.clock, reason="manual",
                       budget=budget, strategy=strategy, dry_run=dry_run, boundary=boundary,
                       extract=self._extractor(branch))

    def recall(self, conversation_id: str, seq: int) -> Item:
        """A log item verbatim, whatever compaction did to it in the context."""
        return self.store.item(conversation_id, seq)

    def constraints(self, conversation_id: str, branch: str = MAIN) -> list[Constraint]:
        return active(self.store.history(conversation_id, branch))

    def add_constraint(self, conversation_id: str, text: str, branch: str = MAIN, *,
                       replaces: int | None = None) -> Item:
        return add_constraint(self.store, conversation_id, text, branch, replaces=replaces,
                              max_bytes=self.max_message_bytes, clock=self.clock)

    def remove_constraint(self, conversation_id: str, seq: int, branch: str = MAIN) -> Item:
        return remove_constraint(self.store, conversation_id, seq, branch, clock=self.clock)

    def working_state(self, conversation_id: str, branch: str = MAIN) -> WorkingState:
        return state_of(self.store.history(conversation_id, branch))

    def update_state(self, conversation_id: str, changes: Mapping[str, Any],
                     branch: str = MAIN) -> WorkingState:
        """Apply ``changes`` (see ``compaction.working_state.update``) and record the new
        state; it is shown in the tail from the next call on."""
        return update_state(self.store, conversation_id, changes, branch, clock=self.clock)

    def _extractor(self, branch: str) -> Callable[[Sequence[Item]], Sequence[NewItem]] | None:
        if not self.model_extraction:
            return None

        def run(history: Sequence[Item]) -> Sequence[NewItem]:
            with self._model_lock:
                return extract(self.store, self.model, history, branch,
                               clock=self.clock).proposals
        return run

    def _auto_compact(self, head: Item, branch: str) -> tuple[Item, Request | None]:
        """Compact before a call when the policy says so. Returns the branch's head, and the
        request to send when measuring it already built it (nothing changed since)."""
        policy = self.policy
        if policy is None:
            return head, None
        assemble_for = self.assembler(head.conversation_id, branch)
        history = self.store.history(head.conversation_id, branch)
        request = assemble_for(history)
        tokens = sum(n for _, n in request_tokens(request, self.count))
        limit, message, through = policy.hard_limit, unanswered(history), None
        if limit is not None and tokens > limit:
            reason = "context_limit"
        elif message is not None and tokens > policy.low_water \
                and starts_new_task(message.content["text"]):
            reason, through = "task_boundary", message.seq - 1  # the finished task leaves
        elif tokens > policy.high_water:
            reason = "high_water"
        else:
            return head, request  # the common case: the measured request is the one to send
        done = compact(self.store, head.conversation_id, branch, assemble_for=assemble_for,
                       count=self.count, policy=policy, clock=self.clock, reason=reason,
                       through=through, extract=self._extractor(branch),
                       decide=lambda plan: reason == "context_limit" or plan.price.pays_off)
        if done.applied is not None:
            return done.applied, None
        return self.store.head(head.conversation_id, branch) or head, None

    # -- steps ---------------------------------------------------------------------------

    def _respond(self, message: Item, branch: str, on_text: OnText | None, *,
                 head: Item | None = None, holding: Holding | None = None) -> TurnResult:
        """Answer user ``message``: call the model, and while it asks for tools, record its
        calls, run them through the harness, record their results, and call it again.
        ``head`` is the branch's newest item when it is not the message itself (a compaction,
        a constraint, or tool calls and results of this turn recorded before)."""
        head = head or message
        limits = self.toolbox.limits
        rounds, spent = 0, 0
        results: list[Item] = []
        while True:
            head, request = self._auto_compact(head, branch)
            request = request or self.request_for(head.conversation_id, branch)
            if rounds >= limits.max_rounds or (limits.max_turn_tokens is not None
                                               and spent >= limits.max_turn_tokens):
                request = replace(request, tool_choice="none")  # the loop's last call
            with self._model_lock:  # one backend instance runs one call at a time
                outcome = call_model(self.model, request, clock=self.clock, on_text=on_text)
            sent = sent_request(request, outcome, self.model.model_id)
            prefix = report(sent, request, self._previous(head.conversation_id, branch)).to_json()
            completion = outcome.completion
            if completion is None:
                call = record_failure(self.store, head=head, branch=branch, request=request,
                                      outcome=outcome, model_id=self.model.model_id,
                                      clock=self.clock, prefix=prefix)
                assert outcome.error is not None
                if isinstance(outcome.error, KeyboardInterrupt | ThreadlineError):
                    raise outcome.error  # a cancel, a model error: already says what happened
                raise ModelCallFailed(call.id, outcome.error) from outcome.error
            spent += completion.usage.prompt_tokens + completion.usage.completion_tokens
            if not completion.tool_calls or request.tool_choice == "none":
                reply, call = commit_reply(self.store, head=head, branch=branch,
                                           request=request, outcome=outcome,
                                           model_id=self.model.model_id, clock=self.clock,
                                           prefix=prefix)
                return TurnResult(head.conversation_id, branch, message, reply, call,
                                  tool_results=tuple(results))
            history = self.store.history(head.conversation_id, branch)
            taken = {i.content["call_id"] for i in history
                     if i.kind is ItemKind.TOOL_CALL and i.turn == message.turn}
            decided = call_items([(c.id, c.name, c.arguments) for c in completion.tool_calls],
                                 taken)
            if completion.text:  # what the model said alongside its calls travels with them
                decided[0] = NewItem(decided[0].kind, {**decided[0].content,
                                                       "text": completion.text})
            head, _ = commit_reply(self.store, head=head, branch=branch, request=request,
                                   outcome=outcome, model_id=self.model.model_id,
                                   clock=self.clock, prefix=prefix, items=decided)
            rounds += 1
            results += self._run_pending(head.conversation_id, branch, holding)
            head = self.store.head(head.conversation_id, branch) or head

    def _run_pending(self, conversation_id: str, branch: str,
                     holding: Holding | None) -> list[Item]:
        """Run the open turn's recorded tool calls that have no result yet, recording each
        result before the loop goes on; a replayed turn runs only these."""
        history = self.store.history(conversation_id, branch)
        message = open_turn(history)
        calls = [] if message is None else pending_calls(history, message)
        if not calls:
            return []

        def record(result: NewItem) -> Item:
            return _append(self.store, conversation_id, branch, self.clock, result)

        def before_side_effect() -> None:
            if holding is not None:
                holding.protect()  # a cancel asked for before now stops the turn here

        try:
            return execute_in_order(self.toolbox, calls, history, branch,
                                    before_side_effect=before_side_effect, record=record)
        except TurnCancelled:
            history = self.store.history(conversation_id, branch)
            for call in pending_calls(history, calls[0]):  # every call left gets an answer
                record(not_run(call, "not run: a newer message cancelled this turn"))
            raise

    def _previous(self, conversation_id: str, branch: str) -> Previous | None:
        """The call this one's prefix is measured against: the branch's last, else (the first
        call on a fork) the conversation's last."""
        last = self.store.last_call(conversation_id, branch)
        same_branch = last is not None
        if last is None:
            last = self.store.last_call(conversation_id)
        if last is None or last.request is None:
            return None
        report = PrefixReport.from_json(last.prefix) if last.prefix else None
        return Previous(last.id, last.request, () if report is None else report.layout,
                        same_branch, None if report is None else report.compaction_seq)

    def _finished(self, message: Item, reply: Item) -> TurnResult:
        if "cached" in reply.content:  # served from the answer cache: its call is elsewhere
            return TurnResult(message.conversation_id, reply.branch, message, reply,
                              self.store.call(reply.content["cached"]["call_id"]),
                              deduplicated=True)
        call = next((c for c in self.store.calls(message.conversation_id)
                     if c.reply_seq == reply.seq), None)
        if call is None:  # an imported reply was never produced by a call
            raise InputError(f"message {message.seq} was answered without a recorded call")
        return TurnResult(message.conversation_id, reply.branch, message, reply,
                          self.store.call(call.id), deduplicated=True)


def _checked(on_text: OnText | None, holding: Holding) -> OnText:
    """``on_text`` that also keeps the lease and stops when a newer message cancels."""
    def each(piece: str) -> None:
        holding.check()
        if on_text is not None:
            on_text(piece)
    return each


def update_state(store: Store, conversation_id: str, changes: Mapping[str, Any],
                 branch: str = MAIN, *, clock: Callable[[], datetime] = utc_now) -> WorkingState:
    """Apply ``changes`` to a branch's working state and record the new state."""
    state = update(state_of(store.history(conversation_id, branch)), changes)
    _append(store, conversation_id, branch, clock, state_item(state))
    return state


def add_constraint(store: Store, conversation_id: str, text: str, branch: str = MAIN, *,
                   replaces: int | None = None, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                   clock: Callable[[], datetime] = utc_now) -> Item:
    """Set a standing instruction (or, with ``replaces``, edit one). It applies from the next
    turn, in the tail until the next compaction pins it."""
    text = validate_text(text, max_bytes=max_bytes).strip()
    if replaces is not None:
        _active_constraint(store, conversation_id, branch, replaces)
    return _append(store, conversation_id, branch, clock,
                   new_constraint(text, source="user", replaces=replaces))


def remove_constraint(store: Store, conversation_id: str, seq: int, branch: str = MAIN, *,
                      clock: Callable[[], datetime] = utc_now) -> Item:
    """Withdraw a constraint: it stops applying from the next turn; the log keeps it."""
    _active_constraint(store, conversation_id, branch, seq)
    return _append(store, conversation_id, branch, clock, removal(seq))


def _active_constraint(store: Store, conversation_id: str, branch: str, seq: int) -> Constraint:
    for constraint in active(store.history(conversation_id, branch)):
        if constraint.seq == seq:
            return constraint
    raise InputError(f"item {seq} is not an active constraint on branch {branch!r} of "
                     f"{conversation_id}",
                     hint=f"list them with: threadline constraints list {conversation_id}")


def _append(store: Store, conversation_id: str, branch: str, clock: Callable[[], datetime],
            item: NewItem) -> Item:
    return store.commit(Commit(conversation_id=conversation_id, branch=branch,
                               created_at=clock(), check_head=False, items=[item])).items[0]


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
