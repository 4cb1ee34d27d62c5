"""Renderers produce payloads the official SDKs accept, with breakpoints where they belong."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.render.sdk_shapes import problems
from threadline.items import Item, ItemKind, NewItem, chain_items
from threadline.render.anthropic import MAX_BREAKPOINTS, render_anthropic
from threadline.render.openai import prompt_cache_key, render_openai
from threadline.request import TailBlock, ToolSpec
from threadline.turn.assemble import assemble

anthropic_params = pytest.importorskip("anthropic.types.message_create_params")
openai_params = pytest.importorskip("openai.types.chat.completion_create_params")

_T = datetime(2026, 3, 1, tzinfo=UTC)
LONG = "All prices in EUR. " * 400  # ~7,600 characters: past any minimum cacheable length


def _items(*specs: tuple[ItemKind, dict]) -> list[Item]:
    return chain_items("c_r", [NewItem(kind, content) for kind, content in specs],
                       created_at=_T)


HISTORY = _items(
    (ItemKind.USER, {"text": "Find flights to Lisbon."}),
    (ItemKind.TOOL_CALL, {"call_id": "t1", "name": "search", "arguments": {"to": "LIS"}}),
    (ItemKind.TOOL_CALL, {"call_id": "t2", "name": "prices", "arguments": {"to": "LIS"}}),
    (ItemKind.TOOL_RESULT, {"call_id": "t1", "output": "TP123", "is_error": False}),
    (ItemKind.TOOL_RESULT, {"call_id": "t2", "output": "€120", "is_error": False}),
    (ItemKind.ASSISTANT, {"text": "TP123 for €120."}),
    (ItemKind.USER, {"text": "Book it."}),
)
TOOLS = [ToolSpec("search", "Search flights. " + LONG, {"type": "object", "properties": {}}),
         ToolSpec("prices", "Price a flight", {"type": "object", "properties": {}})]


def _request(**changes: object):  # type: ignore[no-untyped-def]
    return assemble(HISTORY, **{"system": "You are a travel agent. " + LONG, "tools": TOOLS,
                                "static": ["Fare rules: " + LONG],
                                "tail": [TailBlock("time", "2026-03-01T09:00Z")], **changes})


def test_openai_payload_matches_the_sdk_types() -> None:
    payload = render_openai(_request(), model="gpt-5.6",
                            cache_key=prompt_cache_key("c_r", "main"), max_tokens=100)
    assert problems(payload, openai_params.CompletionCreateParamsNonStreaming) == []
    assert [t["function"]["name"] for t in payload["tools"]] == ["prices", "search"]
    assert payload["prompt_cache_key"] == prompt_cache_key("c_r", "main") != \
        prompt_cache_key("c_r", "b2")
    assert payload["messages"][-1] == {"role": "user", "content": "Book it."}


def test_anthropic_payload_matches_the_sdk_types_with_four_breakpoints() -> None:
    payload = render_anthropic(_request(), model="claude-sonnet-4-6", max_tokens=100)
    assert problems(payload, anthropic_params.MessageCreateParamsNonStreaming) == []
    marked = _cache_controls(payload)
    assert len(marked) == MAX_BREAKPOINTS
    assert marked == ["tools[1]", "system[0]", "system[1]", "messages[3].content[0]"]
    roles = [m["role"] for m in payload["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]  # strictly alternating
    tool_turn = payload["messages"][2]["content"]
    assert [b["type"] for b in tool_turn] == ["tool_result", "tool_result"]
    # the breakpoint is on the last completed turn; the tail and the new message come after
    last = payload["messages"][-1]["content"]
    assert [b["text"] for b in last] == ["[time]\n2026-03-01T09:00Z", "Book it."]
    assert all("cache_control" not in b for b in last)


def test_breakpoints_below_the_minimum_cacheable_length_are_not_placed() -> None:
    short = render_anthropic(_request(system="Short.", static=[], tools=[]),
                             model="claude-opus-4-6", max_tokens=100,
                             min_cacheable_tokens=4096)
    assert _cache_controls(short) == []
    assert problems(short, anthropic_params.MessageCreateParamsNonStreaming) == []


def test_the_checker_itself_catches_a_misspelt_key() -> None:
    bad = {"model": "m", "max_tokens": 1,
           "messages": [{"role": "user", "content": [{"type": "text", "txt": "hi"}]}]}
    assert problems(bad, anthropic_params.MessageCreateParamsNonStreaming)


def _cache_controls(payload: dict) -> list[str]:
    found = [f"tools[{i}]" for i, t in enumerate(payload.get("tools", []))
             if "cache_control" in t]
    found += [f"system[{i}]" for i, b in enumerate(payload.get("system", []))
              if "cache_control" in b]
    found += [f"messages[{i}].content[{j}]" for i, m in enumerate(payload["messages"])
              for j, b in enumerate(m["content"]) if "cache_control" in b]
    return found
