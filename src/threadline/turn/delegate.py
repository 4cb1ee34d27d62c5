"""Delegation: a task handed to a sub-agent, which works in a conversation of its own.

A parent turn's ``delegate`` tool call (or ``Engine.delegate`` from code) starts a **child
conversation** for the task: its own system prompt, tools and budget (the agent's), its own
lease and exact call records, compaction if it runs long. Everything it reads and every dead
end it explores stays in the child's log; only its final answer, cut to ``result_tokens``,
returns to the parent, as an untrusted tool result tagged with the child's id. The parent can
read the child's whole log by that id (the ``delegation_log`` tool).

The link is recorded on both sides: the child's conversation metadata names its parent
(``parent``: conversation, branch, turn, tool call, agent, depth), and the parent's tool result
names the child and what it cost (``details``: calls and tokens, the child's descendants'
included). A child's id is derived from the tool call's idempotency key, so a turn replayed
after a crash finds the child it started: finished (its recorded answer returns, with no new
model call) or interrupted (the child's own turn resumes, running only what never ran).

Delegation is per conversation and off by default: a conversation whose metadata carries
``delegation`` (:class:`Delegation`: how many generations of children, how many delegations
per turn) is offered the tools; a child inherits the limits one generation down.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import InputError
from threadline.items import Conversation, Item, ItemKind
from threadline.render.openai import prompt_cache_key
from threadline.request import ToolSpec
from threadline.turn.tools import Tool, ToolLimits

DELEGATE = "delegate"
DELEGATION_LOG = "delegation_log"
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,47}$")


@dataclass(frozen=True)
class Agent:
    """A sub-agent a conversation may delegate to: what it is for (shown to the parent
    model), its system prompt, its tools, its budget (``limits``: model calls per task,
    tokens per task, side-effecting calls), and how much of its answer returns."""

    name: str
    description: str
    system: str
    tools: Sequence[Tool | ToolSpec] = ()
    limits: ToolLimits = field(default_factory=ToolLimits)
    result_tokens: int = 400

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise InputError(f"invalid agent name {self.name!r}",
                             hint="use 1-48 lowercase letters, digits, '-' or '_', "
                                  "starting with a letter")
        if self.result_tokens < 16:
            raise InputError(f"agent {self.name!r}: result_tokens must be at least 16")
        if any(t.name in (DELEGATE, DELEGATION_LOG) for t in self.tools):
            raise InputError(f"agent {self.name!r}: {DELEGATE!r} and {DELEGATION_LOG!r} are "
                             "threadline's own tools; a child is offered them by its limits")


@dataclass(frozen=True)
class Delegation:
    """A conversation's delegation limits: children at most ``max_depth`` generations below
    it, at most ``max_fanout`` delegations in one turn."""

    max_depth: int = 1
    max_fanout: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.max_depth <= 8 or not 1 <= self.max_fanout <= 32:
            raise InputError(f"delegation limits out of range: max_depth {self.max_depth} "
                             f"(1-8), max_fanout {self.max_fanout} (1-32)")

    def to_json(self) -> dict[str, int]:
        return {"max_depth": self.max_depth, "max_fanout": self.max_fanout}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Delegation:
        return cls(int(data["max_depth"]), int(data["max_fanout"]))


@dataclass(frozen=True)
class ParentLink:
    """Where a child conversation came from: the parent's turn and tool call (None for a
    delegation from code), the agent, the root of the tree, and the child's generation."""

    conversation_id: str
    branch: str
    turn: int
    call_id: str | None
    agent: str
    root: str
    depth: int

    def to_json(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "branch": self.branch,
                "turn": self.turn, "call_id": self.call_id, "agent": self.agent,
                "root": self.root, "depth": self.depth}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ParentLink:
        return cls(data["conversation_id"], data["branch"], int(data["turn"]),
                   data.get("call_id"), data["agent"], data["root"], int(data["depth"]))


def delegation_of(conversation: Conversation) -> Delegation | None:
    found = conversation.metadata.get("delegation")
    return None if found is None else Delegation.from_json(found)


def parent_of(conversation: Conversation) -> ParentLink | None:
    found = conversation.metadata.get("parent")
    return None if found is None else ParentLink.from_json(found)


def may_delegate(conversation: Conversation) -> bool:
    """Whether the conversation's turns are offered the delegation tools."""
    limits, link = delegation_of(conversation), parent_of(conversation)
    return limits is not None and (0 if link is None else link.depth) < limits.max_depth


def child_link(parent: Conversation, branch: str, turn: int, call_id: str | None,
               agent: str) -> ParentLink:
    above = parent_of(parent)
    return ParentLink(parent.id, branch, turn, call_id, agent,
                      parent.id if above is None else above.root,
                      1 if above is None else above.depth + 1)


def child_metadata(parent: Conversation, link: ParentLink) -> dict[str, Any]:
    """A child's metadata: its link, the limits it inherits, and the prompt-cache key it
    shares with its siblings of the same agent (their requests begin alike)."""
    metadata: dict[str, Any] = {"parent": link.to_json(),
                                "prompt_cache_key": prompt_cache_key(link.root,
                                                                     f"agent:{link.agent}")}
    limits = delegation_of(parent)
    if limits is not None:
        metadata["delegation"] = limits.to_json()
    return metadata


def child_id(key: str) -> str:
    """The child conversation a delegation with idempotency ``key`` runs in: the same for
    every replay of the same recorded call."""
    return "c_" + hashlib.blake2b(key.encode("utf-8"), digest_size=13).hexdigest()


def fanout_index(history: Sequence[Item], turn: int, call_id: str) -> int:
    """The position of delegate call ``call_id`` among its turn's delegate calls."""
    calls = [i.content["call_id"] for i in history if i.kind is ItemKind.TOOL_CALL
             and i.turn == turn and i.content["name"] == DELEGATE]
    return calls.index(call_id) if call_id in calls else len(calls)


def specs(agents: Sequence[Agent], *, parallel: bool = True) -> tuple[ToolSpec, ToolSpec]:
    """The delegation tools as the model is shown them (``parallel``: several delegations
    in one reply run together)."""
    listed = "\n".join(f"- {a.name}: {a.description}" for a in agents)
    longest = max(a.result_tokens for a in agents)
    delegate = ToolSpec(
        DELEGATE,
        "Hand a self-contained task to a sub-agent. It works in a conversation of its own "
        "(its searches and dead ends stay there) and returns only its final answer, at most "
        f"{longest} tokens, with the id of its conversation."
        f"{' Calls in one reply run together.' if parallel else ''} Agents:\n{listed}",
        {"type": "object", "additionalProperties": False, "required": ["agent", "task"],
         "properties": {"agent": {"type": "string", "enum": [a.name for a in agents]},
                        "task": {"type": "string", "minLength": 1,
                                 "description": "Everything the sub-agent needs to know: "
                                                "it sees nothing of this conversation."}}})
    log = ToolSpec(
        DELEGATION_LOG,
        "Read the whole log of a sub-agent's conversation, by the id its answer carried.",
        {"type": "object", "additionalProperties": False, "required": ["child"],
         "properties": {"child": {"type": "string", "minLength": 1}}})
    return delegate, log


@dataclass(frozen=True)
class Delegated:
    """A delegation's outcome: the child, its answer as the parent receives it, and what the
    child (with its own children) spent."""

    child_id: str
    agent: str
    answer: str
    truncated: bool
    calls: int
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int

    def shown(self) -> str:
        """What the parent model reads (as an untrusted tool output)."""
        return json.dumps({"child": self.child_id, "agent": self.agent,
                           "answer": self.answer, "truncated": self.truncated},
                          ensure_ascii=False)

    def details(self) -> dict[str, Any]:
        """What the parent's log keeps beside it."""
        return {"child": self.child_id, "agent": self.agent, "truncated": self.truncated,
                "calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "cached_tokens": self.cached_tokens, "output_tokens": self.output_tokens}


def bounded(text: str, limit: int, count: Callable[[str], int]) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` tokens (by ``count``), at a word boundary."""
    if count(text) <= limit:
        return text, False
    words = text.split(" ")
    low, high = 0, len(words)
    while low < high:  # the most words that fit
        middle = (low + high + 1) // 2
        if count(" ".join(words[:middle])) <= limit:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low]), True


def agents_at(spec: str) -> tuple[Agent, ...]:
    """The agents named by ``spec``, "package.module:NAME": a sequence of :class:`Agent`, or
    a function of no arguments that returns one (``THREADLINE_AGENTS``)."""
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise InputError(f"cannot import the agents' module {module_name!r}: {err}",
                         hint="THREADLINE_AGENTS names an importable module, as "
                              "package.module:NAME; check the name and PYTHONPATH") from None
    found = getattr(module, attribute, None)
    if found is None:
        raise InputError(f"module {module_name!r} has no {attribute!r}",
                         hint="THREADLINE_AGENTS is package.module:NAME, NAME a sequence of "
                              "threadline.Agent or a function returning one")
    if callable(found):
        found = found()
    agents = tuple(found) if isinstance(found, Sequence) and not isinstance(found, str) \
        else None
    if not agents or not all(isinstance(a, Agent) for a in agents):
        raise InputError(f"{spec} is not a non-empty sequence of threadline.Agent",
                         hint="define NAME = [Agent(...), ...] in the module")
    return agents
