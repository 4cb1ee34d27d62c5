"""The Anthropic Messages payload, with ``cache_control`` breakpoints.

The system prompt, pinned instructions and static context travel in ``system`` as text blocks;
the conversation in ``messages`` with strictly alternating roles (tool results ride in the next
user turn). Breakpoints follow the request's cache points — end of tools, end of system, end of
static context, and the last completed turn, which moves forward every turn — never more than
four (past four, the first three and the last), and none where the prefix before it is shorter
than the model's minimum cacheable length (it would not be cached, and a breakpoint is a scarce
thing to waste). ``ttl`` ("5m" or "1h") is written into each breakpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from threadline.request import Message, Request

MAX_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}


def approximate_tokens(text: str) -> int:
    """About four characters a token: good enough to decide whether a prefix is long enough."""
    return (len(text) + 3) // 4


def render_anthropic(request: Request, *, model: str, max_tokens: int,
                     min_cacheable_tokens: int = 1024,
                     count_tokens: Callable[[str], int] = approximate_tokens,
                     ttl: str | None = None, **params: Any) -> dict[str, Any]:
    messages = request.messages
    system_count = 0
    while system_count < len(messages) and messages[system_count].role == "system":
        system_count += 1
    tools: list[dict[str, Any]] = [{"name": t.name, "description": t.description,
              "input_schema": dict(t.parameters) or {"type": "object", "properties": {}}}
             for t in request.tools]
    system: list[dict[str, Any]] = [{"type": "text", "text": m.content}
                                    for m in messages[:system_count]]
    turns: list[dict[str, Any]] = []
    owner: list[tuple[int, int]] = []  # for each request message: (turn index, last block)
    for message in messages[system_count:]:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
        owner.append((len(turns) - 1, len(turns[-1]["content"]) - 1))
    control = dict(_EPHEMERAL) if ttl is None else {**_EPHEMERAL, "ttl": ttl}
    targets: list[dict[str, Any]] = []
    for point in request.cache_points():
        prefix_tokens = _prefix_tokens(tools, messages[:point], count_tokens)
        if prefix_tokens < min_cacheable_tokens:
            continue
        target: dict[str, Any]
        if point == 0:
            if not tools:
                continue
            target = tools[-1]
        elif point <= system_count:
            target = system[point - 1]
        else:
            turn, block = owner[point - system_count - 1]
            target = turns[turn]["content"][block]
        if not any(t is target for t in targets):
            targets.append(target)
    if len(targets) > MAX_BREAKPOINTS:  # the last one, which moves every turn, is kept
        targets = targets[:MAX_BREAKPOINTS - 1] + targets[-1:]
    for target in targets:
        target["cache_control"] = dict(control)
    payload: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": turns}
    if system:
        payload["system"] = system
    if tools:
        payload["tools"] = tools
        if request.tool_choice != "auto":
            payload["tool_choice"] = {"type": request.tool_choice}
    payload.update(params)
    return payload


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "tool_result", "tool_use_id": message.tool_call_id,
                 "content": message.content}]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": dict(call.arguments)})
    return blocks or [{"type": "text", "text": "(empty)"}]


def _prefix_tokens(tools: list[dict[str, Any]], messages: Sequence[Message],
                   count_tokens: Callable[[str], int]) -> int:
    text = json.dumps(tools, sort_keys=True) if tools else ""
    return count_tokens(text + "".join(m.content for m in messages))
