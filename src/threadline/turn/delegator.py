"""The running of delegations: a child conversation per task, its turn, its answer.

``turn/delegate.py`` says what a delegation is (agents, limits, links); this module runs one,
for the ``delegate`` tool and for ``Engine.delegate``; ``turn/children.py`` reads them back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from threadline.errors import InputError, UnknownConversation
from threadline.items import Conversation, ItemKind, NewItem, new_id
from threadline.models.base import OnText
from threadline.plugin import Host
from threadline.request import ToolSpec
from threadline.stores.base import Commit, NewConversation, append
from threadline.turn.children import child_log, spent
from threadline.turn.delegate import (
    Agent,
    Delegated,
    ParentLink,
    bounded,
    child_id,
    child_link,
    child_metadata,
    delegation_of,
    fanout_index,
    may_delegate,
    specs,
)
from threadline.turn.input import TurnInput
from threadline.turn.result import TurnResult
from threadline.turn.tools import Tool, ToolContext, ToolOutput, idempotency_key


class Runs(Protocol):
    """What runs a child's turn: an engine built for one agent."""

    def run_turn(self, turn: TurnInput, *, on_text: OnText | None = None) -> TurnResult: ...


class Delegator:
    """An engine's delegation: its agents, the tools that reach them, and the running of a
    child's task (``child_engine`` builds the engine that runs an agent's turns)."""

    def __init__(self, host: Host, agents: Sequence[Agent],
                 child_engine: Callable[[Agent], Runs]) -> None:
        self.host, self.child_engine = host, child_engine
        self.agents: dict[str, Agent] = {}
        for agent in agents:
            if agent.name in self.agents:
                raise InputError(f"two agents are named {agent.name!r}; agent names must be "
                                 "unique")
            self.agents[agent.name] = agent
        # where an agent can change the world, so can a delegation: it then runs alone, and
        # once it starts the parent's turn is past cancelling (docs/tools.md)
        changes = any(isinstance(t, Tool) and t.side_effect for a in agents for t in a.tools)
        delegate, log = specs(agents, parallel=not changes) if agents else (None, None)
        self.tools: tuple[Tool, ...] = () if delegate is None or log is None else (
            Tool(delegate.name, delegate.description, delegate.parameters, self._delegate_call,
                 side_effect=changes),
            Tool(log.name, log.description, log.parameters, self._log_call))

    def offered(self, conversation: Conversation) -> tuple[ToolSpec, ...]:
        """The delegation tools a conversation's requests show: none where it is off."""
        return tuple(t.spec for t in self.tools) if self.tools and may_delegate(
            conversation) else ()

    def delegate(self, conversation_id: str, task: str, agent: str, *, branch: str,
                 client_msg_id: str | None, on_text: OnText | None) -> Delegated:
        """A delegation from code: the child is linked to the branch's newest turn, and a
        note on the branch records what it cost (kept out of the model's context)."""
        store = self.host.store
        parent = store.conversation(conversation_id)
        head = store.head(conversation_id, branch)
        chosen = self._agent(agent)
        link = child_link(parent, branch, 0 if head is None else head.turn, None, chosen.name)
        # the same client id in another conversation names another delegation
        key = idempotency_key(conversation_id, 0, f"code:{client_msg_id or new_id('dlg_')}")
        done = self._run(chosen, task, parent, link, key, lambda: None,
                         on_text or (lambda _: None))
        if not any(c.get("delegation", {}).get("child") == done.child_id
                   for c in (i.content for i in store.history(conversation_id, branch)
                             if i.kind is ItemKind.NOTE)):
            append(store, conversation_id, branch, self.host.clock(),
                   NewItem.note(f"delegated to {chosen.name}: {done.child_id}",
                                delegation=done.details()))
        return done

    def _agent(self, name: object) -> Agent:
        found = self.agents.get(str(name))
        if found is None:
            raise InputError(f"no agent named {name!r}; this engine has: "
                             f"{', '.join(sorted(self.agents)) or 'none'}")
        return found

    def _delegate_call(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        store = self.host.store
        parent = store.conversation(context.conversation_id)
        limits = delegation_of(parent)
        if limits is None or not may_delegate(parent):
            raise InputError("this conversation may not delegate" + (
                "" if limits is None else f": its sub-agents are {limits.max_depth} "
                "generation(s) deep at most"))
        history = store.history(context.conversation_id, context.branch)
        if fanout_index(history, context.turn, context.call_id) >= limits.max_fanout:
            raise InputError(f"at most {limits.max_fanout} delegations a turn; answer with "
                             "what the others returned")
        agent = self._agent(arguments["agent"])
        link = child_link(parent, context.branch, context.turn, context.call_id, agent.name)
        done = self._run(agent, str(arguments["task"]), parent, link,
                         context.idempotency_key, context.check, lambda _: context.check())
        return ToolOutput(done.shown(), done.details())

    def _log_call(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        return child_log(self.host.store, context.conversation_id, str(arguments["child"]),
                         limit_chars=64_000)

    def _run(self, agent: Agent, task: str, parent: Conversation, link: ParentLink,
             key: str, check: Callable[[], None], on_text: OnText) -> Delegated:
        store, cid = self.host.store, child_id(key)
        try:
            store.conversation(cid)
        except UnknownConversation:
            title = f"{agent.name}: {' '.join(task.split())[:80]}"
            try:
                store.commit(Commit(conversation_id=cid, created_at=self.host.clock(),
                                    expected_head=None, create=NewConversation(
                                        cid, title=title, system=agent.system,
                                        metadata=child_metadata(parent, link),
                                        owner=parent.owner)))
            except InputError:
                store.conversation(cid)  # created meanwhile, by another try of the same call
        check()  # a turn cancelled already starts no child
        result = self.child_engine(agent).run_turn(
            TurnInput(task, conversation_id=cid, client_msg_id=key), on_text=on_text)
        answer, truncated = bounded(result.reply.text, agent.result_tokens, self.host.count)
        calls, prompt, cached, output = spent(store, cid)
        return Delegated(cid, agent.name, answer, truncated, calls, prompt, cached, output)
