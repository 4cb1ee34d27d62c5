"""Rendering a re-assembled request as the recorded backend did, without calling it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from threadline.calls import CallStatus, ModelCall, SentRequest, Timings, Usage
from threadline.items import Item, ItemKind, chain_hash
from threadline.render.anthropic import render_anthropic
from threadline.render.openai import prompt_cache_key, render_openai
from threadline.replay.diff import first_difference
from threadline.replay.rerender import rerenderer
from threadline.request import Request, ToolSpec
from threadline.turn.assemble import assemble

AT = datetime(2026, 3, 1, tzinfo=UTC)
TOOLS = (ToolSpec("weather", "The weather.", {"type": "object"}),
         ToolSpec("clock", "The time.", {"type": "object"}))


def _history() -> list[Item]:
    items, parent = [], None
    for seq, (kind, text) in enumerate([(ItemKind.USER, "hi"), (ItemKind.ASSISTANT, "hello"),
                                        (ItemKind.USER, "weather?")], 1):
        content = {"text": text}
        digest = chain_hash(parent, kind, content)
        items.append(Item("c_1", seq, "main", seq - 1 or None, (seq + 1) // 2, kind, content,
                          digest, AT))
        parent = digest
    return items


def _request(tools: tuple[ToolSpec, ...] = TOOLS) -> Request:
    return assemble(_history(), system="Be brief.", tools=tools,
                    cache_key=prompt_cache_key("c_1", "main"))


def _call(sent: SentRequest) -> ModelCall:
    return ModelCall("call_1", "c_1", "main", 2, 3, None, CallStatus.OK, sent.model, sent, {},
                     Usage(), Timings(), AT)


def _as_openai_sends(request: Request) -> SentRequest:
    """What OpenAICompatibleModel records for ``request``."""
    payload = render_openai(request, model="m", cache_key=request.cache_key, stream=True,
                            stream_options={"include_usage": True}, max_tokens=512)
    return SentRequest("openai-compatible:m", tuple(payload["messages"]),
                       {k: v for k, v in payload.items() if k != "messages"})


def test_an_openai_payload_is_rebuilt_byte_for_byte() -> None:
    for request in (_request(), replace(_request(), tool_choice="none")):
        recorded = _as_openai_sends(request)
        rerender = rerenderer(_call(recorded))
        assert rerender is not None
        again = rerender(_request(), recorded)  # assembled afresh: tool_choice is the loop's
        assert again.compared == "bytes"
        assert again.sent.payload_json() == recorded.payload_json()
        assert first_difference(recorded, again.sent, _request()) is None


def test_a_changed_tool_definition_is_named_tools() -> None:
    recorded = _as_openai_sends(_request())
    rerender = rerenderer(_call(recorded))
    assert rerender is not None
    changed = _request((TOOLS[0], replace(TOOLS[1], description="The time, in UTC.")))
    d = first_difference(recorded, rerender(changed, recorded).sent, changed)
    assert d is not None and (d.segment, d.field, d.message) == ("tools", "tools", None)
    assert recorded.payload_json().encode()[:d.byte].endswith(b'"description":"The time')


def test_a_changed_cache_key_is_a_params_difference() -> None:
    recorded = _as_openai_sends(_request())
    rerender = rerenderer(_call(recorded))
    assert rerender is not None
    moved = replace(_request(), cache_key="tl-other")
    d = first_difference(recorded, rerender(moved, recorded).sent, moved)
    assert d is not None and (d.segment, d.field) == ("params", "prompt_cache_key")


def test_anthropic_records_are_not_rerendered() -> None:
    payload = render_anthropic(_request(), model="claude", max_tokens=100)
    sent = SentRequest("anthropic:claude", tuple(payload["messages"]),
                       {k: v for k, v in payload.items() if k != "messages"})
    assert rerenderer(_call(sent)) is None


def test_a_llama_cpp_record_is_compared_by_its_messages() -> None:
    request = _request()
    sent = SentRequest("llama.cpp:smollm2", tuple(request.openai_messages()), {"n_ctx": 8192})
    rerender = rerenderer(_call(sent))
    assert rerender is not None and rerender(request, sent).compared == "messages"
    assert first_difference(sent, rerender(request, sent).sent, request) is None
