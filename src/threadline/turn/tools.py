"""The tool harness: what stands between a model's tool call and its effect.

Every call the model asks for passes the same guard, in the harness and not in the prompt:

- the tool must exist and its arguments must be a JSON object valid against its schema;
  otherwise the model gets a structured error as the result, and nothing runs;
- a side-effecting tool runs only while the conversation's capability budget lasts (at most
  ``max_side_effects`` such calls per conversation, whatever the model was persuaded of);
- the tool receives an idempotency key derived from (conversation, turn, tool call id) as
  recorded in the log before it ran, never from sampled text, so a replayed turn passes the
  same key and the system downstream deduplicates;
- its output is cut to ``max_output_bytes`` and recorded as untrusted data, which assembly
  shows to the model inside delimiters that say so.

The loop itself (``Engine``) commits the model's tool calls before any runs ("decided"), then
each result as it is known, in the order the model asked for them ("executed"); a turn
replayed after a crash runs only the calls that have no recorded result.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from threadline.errors import InputError, TurnCancelled
from threadline.items import Item, ItemKind, NewItem, canonical_json
from threadline.request import ToolSpec
from threadline.trust import fence
from threadline.turn.trace import QUIET, Step, Tracer

ToolRun = Callable[[Mapping[str, Any], "ToolContext"], Any]
# a harness policy's say over one call, given the branch's log: why it may not run, or None
# (a safety monitor's restriction to a safe set, ``providers/monitor/``)
ToolGuard = Callable[["Tool", Sequence[Item]], str | None]


def _not_cancelled() -> None:
    return None


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know about where it runs. A long-running tool calls ``check``
    now and then: it raises :class:`~threadline.errors.TurnCancelled` once a newer message
    has cancelled the turn (the cancel then ends the turn, as between streamed pieces)."""

    conversation_id: str
    branch: str
    turn: int
    call_id: str
    idempotency_key: str  # pass it to whatever the tool changes, so a replay changes it once
    check: Callable[[], None] = _not_cancelled


@dataclass(frozen=True)
class ToolOutput:
    """A tool's output with what the log should keep about it beside the text the model is
    shown (``details``: JSON-serialisable, recorded on the result item, never shown)."""

    text: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its schema, and the function that runs it (returning text,
    or anything JSON-serialisable). ``side_effect`` marks tools that change the world."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: ToolRun
    side_effect: bool = False

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


@dataclass(frozen=True)
class ToolLimits:
    """Harness parameters of the tool loop."""

    max_rounds: int = 8                  # model calls per turn that may ask for tools
    max_turn_tokens: int | None = None   # prompt + completion tokens per turn, then no tools
    max_side_effects: int | None = None  # side-effecting calls per conversation
    max_output_bytes: int = 16_384       # a tool's output beyond this is cut
    guards: tuple[ToolGuard, ...] = ()   # asked before a call runs; any may refuse it

    def __post_init__(self) -> None:
        if self.max_rounds < 1 or self.max_output_bytes < 256:
            raise InputError("tool limits: max_rounds must be at least 1 and "
                             "max_output_bytes at least 256")


def idempotency_key(conversation_id: str, turn: int, call_id: str) -> str:
    """The key a side effect carries: the same for every replay of the same recorded call."""
    digest = hashlib.blake2b(canonical_json([conversation_id, turn, call_id]).encode("utf-8"),
                             digest_size=16)
    return "idem_" + digest.hexdigest()


@dataclass
class Toolbox:
    """The tools an engine offers, with the limits its loop enforces."""

    tools: Sequence[Tool | ToolSpec] = ()
    limits: ToolLimits = field(default_factory=ToolLimits)

    def __post_init__(self) -> None:
        self._by_name: dict[str, Tool | ToolSpec] = {}
        self._validators: dict[str, Any] = {}  # built once: a turn may call a tool many times
        for tool in self.tools:
            if tool.name in self._by_name:
                raise InputError(f"two tools are named {tool.name!r}; tool names must be unique")
            validator = jsonschema.validators.validator_for(tool.parameters)
            try:
                validator.check_schema(dict(tool.parameters))
            except jsonschema.SchemaError as err:
                raise InputError(f"tool {tool.name!r} has an invalid JSON schema: "
                                 f"{err.message}") from err
            self._by_name[tool.name] = tool
            self._validators[tool.name] = validator(dict(tool.parameters))

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(t.spec if isinstance(t, Tool) else t for t in self.tools)

    def tool(self, name: str) -> Tool | ToolSpec | None:
        return self._by_name.get(name)

    def run(self, call: Item, history: Sequence[Item], branch: str,
            check: Callable[[], None] = _not_cancelled) -> NewItem:
        """The result item of tool call ``call``: the tool's output, or the guard's error.
        ``check`` goes to the tool (``ToolContext.check``); a cancel it raises ends the
        turn rather than becoming the tool's error."""
        content = call.content
        name, call_id = content["name"], content["call_id"]
        tool = self._by_name.get(name)
        if tool is None:
            return _refused(call_id, name, f"there is no tool named {name!r}; available: "
                            f"{', '.join(sorted(self._by_name)) or 'none'}")
        if not isinstance(tool, Tool):
            return _refused(call_id, name, f"tool {name!r} is declared but has no handler in "
                            "this engine")
        if "malformed_arguments" in content:
            return _refused(call_id, name, "the arguments are not a JSON object: "
                            f"{str(content['malformed_arguments'])[:200]!r}")
        problems = sorted(self._validators[name].iter_errors(content["arguments"]),
                          key=lambda e: list(e.path))
        if problems:
            return _refused(call_id, name, "the arguments do not match the schema",
                            details=[{"path": "/".join(map(str, e.path)) or "(root)",
                                      "problem": e.message} for e in problems[:10]])
        for guard in self.limits.guards:
            refusal = guard(tool, history)
            if refusal is not None:
                return _refused(call_id, name, refusal)
        if tool.side_effect and self.limits.max_side_effects is not None:
            used = sum(1 for item in history if item.kind is ItemKind.TOOL_RESULT
                       and item.content.get("side_effect"))
            if used >= self.limits.max_side_effects:
                return _refused(call_id, name, "the capability budget of this conversation "
                                f"is spent: at most {self.limits.max_side_effects} "
                                "side-effecting calls")
        context = ToolContext(call.conversation_id, branch, call.turn, call_id,
                              idempotency_key(call.conversation_id, call.turn, call_id), check)
        try:
            output = tool.run(content["arguments"], context)
        except TurnCancelled:
            raise
        except Exception as err:  # noqa: BLE001 - the model is told; the loop goes on
            return _result(call_id, name, f"error: {type(err).__name__}: {err}", is_error=True,
                           side_effect=tool.side_effect, key=context.idempotency_key,
                           limit=self.limits.max_output_bytes)
        details: Mapping[str, Any] = {}
        if isinstance(output, ToolOutput):
            details, output = output.details, output.text
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False,
                                                                 default=str)
        return _result(call_id, name, text, side_effect=tool.side_effect,
                       key=context.idempotency_key, limit=self.limits.max_output_bytes,
                       details=details)


def pending_calls(history: Sequence[Item], message: Item) -> list[Item]:
    """Tool calls after ``message`` that have no recorded result, in the order asked."""
    calls: dict[str, Item] = {}
    start = len(history)  # the items after it, found from the end: it is near it
    while start and history[start - 1].seq > message.seq:
        start -= 1
    for item in history[start:]:
        if item.kind is ItemKind.TOOL_CALL:
            calls[item.content["call_id"]] = item
        elif item.kind is ItemKind.TOOL_RESULT:
            calls.pop(item.content["call_id"], None)
    return list(calls.values())


def call_items(calls: Sequence[tuple[str, str, Any]], taken: set[str]) -> list[NewItem]:
    """Tool-call items for what the model asked: (id, name, arguments as parsed, or the raw
    text when it was not a JSON object). An id already used in this turn gets a suffix, so
    every call keeps its own idempotency key."""
    out = []
    for call_id, name, arguments in calls:
        unique, n = call_id or "call", 1
        while unique in taken:
            n += 1
            unique = f"{call_id}~{n}"
        taken.add(unique)
        if isinstance(arguments, Mapping):
            out.append(NewItem.tool_call(unique, name, arguments))
        else:
            item = NewItem.tool_call(unique, name, {})
            out.append(NewItem(item.kind, {**item.content,
                                           "malformed_arguments": str(arguments)}))
    return out


def untrusted_view(output: str, tool: str) -> str:
    """How an untrusted tool output appears in the context: between delimiters that say it
    is data, with any look-alike closing delimiter inside it defused (``threadline.trust``)."""
    return fence("tool-output", output, tool=tool)


def _truncate(text: str, limit: int) -> tuple[str, int | None]:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, None
    kept = data[:limit].decode("utf-8", errors="ignore")
    return kept + f"\n[output cut at {limit} of {len(data)} bytes]", len(data)


def _result(call_id: str, name: str, output: str, *, is_error: bool = False,
            side_effect: bool = False, key: str | None = None, limit: int,
            details: Mapping[str, Any] | None = None) -> NewItem:
    text, original = _truncate(output, limit)
    item = NewItem.tool_result(call_id, text, is_error=is_error)
    extra: dict[str, Any] = {"tool": name, "untrusted": True}
    if details:
        extra["details"] = dict(details)
    if side_effect:
        extra.update(side_effect=True, idempotency_key=key)
    if original is not None:
        extra["truncated_from_bytes"] = original
    return NewItem(item.kind, {**item.content, **extra})


def _refused(call_id: str, name: str, reason: str, *,
             details: list[dict[str, str]] | None = None) -> NewItem:
    """A structured error the model can act on; the tool did not run."""
    body: dict[str, Any] = {"error": "tool_call_refused", "tool": name, "reason": reason}
    if details:
        body["details"] = details
    item = NewItem.tool_result(call_id, json.dumps(body, ensure_ascii=False), is_error=True)
    return NewItem(item.kind, {**item.content, "tool": name, "refused": True})


def open_turn(history: Sequence[Item]) -> Item | None:
    """The newest user message still waiting for its final reply: after it, only tool calls,
    tool results and control items (a turn whose loop was interrupted, or not yet answered)."""
    for item in reversed(history):
        if item.kind is ItemKind.USER:
            return item
        if item.kind is ItemKind.ASSISTANT:
            return None
    return None


def execute_in_order(toolbox: Toolbox, calls: Sequence[Item], history: Sequence[Item],
                     branch: str, *, before_side_effect: Callable[[], None],
                     record: Callable[[NewItem], Item], tracer: Tracer = QUIET,
                     check: Callable[[], None] = _not_cancelled) -> list[Item]:
    """Run ``calls`` and record each result in the order the model asked for them, whatever
    order they finish in. Calls without side effects run concurrently; side-effecting ones
    run one at a time, each after ``before_side_effect`` (which may stop the turn). Each
    runs in a span of ``tracer``, and in a copy of the caller's context (its context
    variables, the current span among them), whichever thread runs it; each gets ``check``
    (``ToolContext.check``)."""
    def side_effect(call: Item) -> bool:
        tool = toolbox.tool(call.content["name"])
        return isinstance(tool, Tool) and tool.side_effect

    def run(call: Item) -> NewItem:
        with tracer.span(Step.TOOL_CALL, call.content["name"], call) as span:
            result = toolbox.run(call, seen, branch, check)
            span.record(result)
        return result

    seen = list(history)
    recorded = []
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="threadline-tool") as pool:
        running = {call.seq: pool.submit(contextvars.copy_context().run, run, call)
                   for call in calls if not side_effect(call)}
        for call in calls:
            if call.seq in running:
                result = running[call.seq].result()
            else:
                before_side_effect()
                result = run(call)
            item = record(result)
            seen.append(item)
            recorded.append(item)
    return recorded


def not_run(call: Item, reason: str) -> NewItem:
    """The result of a call the turn stopped before running."""
    return _refused(call.content["call_id"], call.content["name"], reason)
