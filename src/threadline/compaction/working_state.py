"""The working-state record: what a long task is doing, kept as data instead of prose.

Goal, plan steps with their status, decisions with their reasons, facts with their sources,
and open questions. It lives in the log (each update appends a ``working_state`` item holding
the whole new state, so any past state can be read back), is shown in the tail of every turn
(volatile by nature, so below every cache breakpoint), and survives any compaction untouched:
it is the part of a task that must not depend on a summariser. Updated through the API
(``update_state``) or by the model through the ``update_working_state`` tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from threadline.errors import InputError
from threadline.items import Item, ItemKind, NewItem, utc_now
from threadline.request import ToolSpec
from threadline.stores.base import MAIN, Store, append

STATUSES = ("todo", "doing", "done", "blocked", "dropped")
_LISTS = {"steps": ("text", "status"), "decisions": ("decision", "reason"),
          "facts": ("fact", "source")}
MAX_ENTRIES = 200
MAX_TEXT = 2_000


@dataclass(frozen=True)
class WorkingState:
    goal: str = ""
    steps: tuple[Mapping[str, str], ...] = ()
    decisions: tuple[Mapping[str, str], ...] = ()
    facts: tuple[Mapping[str, str], ...] = ()
    questions: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"goal": self.goal, "steps": [dict(s) for s in self.steps],
                "decisions": [dict(d) for d in self.decisions],
                "facts": [dict(f) for f in self.facts], "questions": list(self.questions)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkingState:
        return cls(goal=data.get("goal", ""), steps=tuple(data.get("steps", ())),
                   decisions=tuple(data.get("decisions", ())),
                   facts=tuple(data.get("facts", ())),
                   questions=tuple(data.get("questions", ())))

    @property
    def empty(self) -> bool:
        return self == WorkingState()

    def render(self) -> str:
        lines = [f"Goal: {self.goal}"] if self.goal else []
        if self.steps:
            lines.append("Plan:")
            lines += [f"  {n}. [{s['status']}] {s['text']}" for n, s in enumerate(self.steps, 1)]
        if self.decisions:
            lines.append("Decisions:")
            lines += [f"  - {d['decision']} (because {d['reason']})" for d in self.decisions]
        if self.facts:
            lines.append("Facts:")
            lines += [f"  - {f['fact']} (source: {f['source']})" for f in self.facts]
        if self.questions:
            lines.append("Open questions:")
            lines += [f"  - {q}" for q in self.questions]
        return "\n".join(lines)


def state_of(history: Sequence[Item]) -> WorkingState:
    """The newest working state on a branch (empty if none was ever set)."""
    for item in reversed(history):
        if item.kind is ItemKind.WORKING_STATE:
            return WorkingState.from_json(item.content["state"])
    return WorkingState()


def update_state(store: Store, conversation_id: str, changes: Mapping[str, Any],
                 branch: str = MAIN, *, clock: Callable[[], datetime] = utc_now) -> WorkingState:
    """Apply ``changes`` (see :func:`update`) to a branch's working state and record the new
    state; it is shown in the tail from the next call on."""
    state = update(state_of(store.history(conversation_id, branch)), changes)
    append(store, conversation_id, branch, clock(), state_item(state))
    return state


def update(state: WorkingState, changes: Mapping[str, Any]) -> WorkingState:
    """``state`` with ``changes`` applied, or an InputError saying what is wrong with them.

    ``goal`` replaces the goal; ``steps``, ``decisions``, ``facts`` and ``questions`` replace
    their list; ``add_steps``, ``add_decisions``, ``add_facts``, ``add_questions`` append;
    ``step_status`` (``{"index": n, "status": s}``, 1-based) moves one step; ``resolve``
    removes the open questions it lists."""
    known = {"goal", "step_status", "resolve", "questions", "add_questions",
             *_LISTS, *(f"add_{name}" for name in _LISTS)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise InputError(f"unknown working-state field(s): {', '.join(unknown)}",
                         hint=f"use: {', '.join(sorted(known))}")
    data = state.to_json()
    if "goal" in changes:
        data["goal"] = _text(changes["goal"], "goal")
    for name, keys in _LISTS.items():
        if name in changes:
            data[name] = _entries(changes[name], name, keys)
        if f"add_{name}" in changes:
            data[name] = data[name] + _entries(changes[f"add_{name}"], f"add_{name}", keys)
    if "questions" in changes:
        data["questions"] = _strings(changes["questions"], "questions")
    if "add_questions" in changes:
        data["questions"] = data["questions"] + _strings(changes["add_questions"],
                                                         "add_questions")
    if "resolve" in changes:
        done = set(_strings(changes["resolve"], "resolve"))
        data["questions"] = [q for q in data["questions"] if q not in done]
    if "step_status" in changes:
        move = changes["step_status"]
        if not isinstance(move, Mapping) or not isinstance(move.get("index"), int):
            raise InputError('step_status needs {"index": N, "status": S}')
        index = move["index"]
        if not 1 <= index <= len(data["steps"]):
            raise InputError(f"step_status: there is no step {index} (the plan has "
                             f"{len(data['steps'])})")
        data["steps"][index - 1] = {**data["steps"][index - 1],
                                    "status": _status(move.get("status"))}
    for name in (*_LISTS, "questions"):
        if len(data[name]) > MAX_ENTRIES:
            raise InputError(f"the working state would hold {len(data[name])} {name}; the "
                             f"limit is {MAX_ENTRIES}", hint="drop or merge old entries")
    return WorkingState.from_json(data)


def state_item(state: WorkingState) -> NewItem:
    return NewItem(ItemKind.WORKING_STATE, {"state": state.to_json()})


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where} must be non-empty text")
    if len(value) > MAX_TEXT:
        raise InputError(f"{where} is {len(value)} characters; the limit is {MAX_TEXT}")
    return value.strip()


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        raise InputError(f"{where} must be a list of strings")
    return [_text(v, where) for v in value]


def _status(value: Any) -> str:
    if value not in STATUSES:
        raise InputError(f"unknown step status {value!r}; use one of {', '.join(STATUSES)}")
    return str(value)


def _entries(value: Any, where: str, keys: tuple[str, str]) -> list[dict[str, str]]:
    if not isinstance(value, list):
        raise InputError(f"{where} must be a list of objects with {keys[0]!r} and {keys[1]!r}")
    out = []
    for entry in value:
        if isinstance(entry, str) and keys == ("text", "status"):
            entry = {"text": entry, "status": "todo"}  # a bare step starts as todo
        if not isinstance(entry, Mapping):
            raise InputError(f"{where}: each entry needs {keys[0]!r} and {keys[1]!r}")
        first = _text(entry.get(keys[0]), f"{where}.{keys[0]}")
        second = _status(entry.get("status", "todo")) if keys[1] == "status" else \
            _text(entry.get(keys[1]), f"{where}.{keys[1]}")
        out.append({keys[0]: first, keys[1]: second})
    return out


def _list_schema(first: str, second: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "object", "required": [first, second],
                                       "properties": {first: {"type": "string"},
                                                      second: {"type": "string"}}}}


UPDATE_TOOL = ToolSpec(
    name="update_working_state",
    description="Update the task's working state: goal, plan steps and their status, "
                "decisions with reasons, facts with sources, open questions. It is shown to "
                "you on every turn and survives any compaction of the conversation.",
    parameters={"type": "object", "additionalProperties": False, "properties": {
        "goal": {"type": "string"},
        "add_steps": _list_schema("text", "status"),
        "step_status": {"type": "object", "required": ["index", "status"], "properties": {
            "index": {"type": "integer", "minimum": 1},
            "status": {"type": "string", "enum": list(STATUSES)}}},
        "add_decisions": _list_schema("decision", "reason"),
        "add_facts": _list_schema("fact", "source"),
        "add_questions": {"type": "array", "items": {"type": "string"}},
        "resolve": {"type": "array", "items": {"type": "string"}}}})


def apply_tool_call(state: WorkingState, arguments: Mapping[str, Any]
                    ) -> tuple[WorkingState | None, str]:
    """The ``update_working_state`` tool: the new state and what to tell the model, or None
    and a structured error the model can correct (nothing is recorded then)."""
    try:
        new = update(state, arguments)
    except InputError as err:
        return None, f"error: {err.message}" + (f" ({err.hint})" if err.hint else "")
    return new, "working state updated:\n" + new.render()
