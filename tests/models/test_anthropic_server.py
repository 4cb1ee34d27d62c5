"""The Anthropic backend against a real Anthropic-compatible server running here: llama.cpp's
own ``llama-server`` (the anthropic-server extra) serving ``/v1/messages`` with the SmolLM2
GGUF. Nothing here is mocked: the SDK streams from the server, and what is checked is what
threadline recorded of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ANTHROPIC_TEST_KEY
from threadline.calls import CallStatus
from threadline.engine import Engine
from threadline.errors import PromptTooLong, ProviderAuthFailed
from threadline.items import ItemKind
from threadline.models.anthropic_messages import AnthropicModel
from threadline.models.llama_server import ALIAS, LlamaServer
from threadline.models.scripted import ScriptedModel, ToolCalls
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.tools import Tool

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

# ~4,400 characters: past the default minimum cacheable prefix (1,024 estimated tokens), so
# the system prompt carries a breakpoint; about 1,000 SmolLM2 tokens
SYSTEM = "You are terse. " + "Answer in one short sentence, and never use lists. " * 85


def _backend(server: LlamaServer, **options: Any) -> AnthropicModel:
    return AnthropicModel(ALIAS, base_url=server.url, api_key=options.pop("api_key",
                          ANTHROPIC_TEST_KEY), max_tokens=options.pop("max_tokens", 16),
                          temperature=0.0, **options)


def test_turns_are_streamed_and_recorded_as_sent_with_the_reported_usage(
        llama_server: LlamaServer, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    backend = _backend(llama_server)
    engine = Engine(store, backend, system=SYSTEM)
    first = engine.run_turn("Name a colour.")
    pieces: list[str] = []
    second = engine.run_turn("Another one?", conversation_id=first.conversation_id,
                             on_text=pieces.append)
    assert first.reply.text.strip() and pieces and "".join(pieces) == second.reply.text

    call = store.call(second.call.id)
    assert call.status is CallStatus.OK and call.model == f"anthropic:{ALIAS}"
    sent = call.request
    assert sent is not None
    assert sent.params["stream"] is True and sent.params["model"] == ALIAS
    assert sent.params["system"] == [{"type": "text", "text": SYSTEM,
                                      "cache_control": {"type": "ephemeral", "ttl": "5m"}}]
    assert [(m["role"], [b["text"] for b in m["content"]]) for m in sent.messages] == [
        ("user", ["Name a colour."]), ("assistant", [first.reply.text]),
        ("user", ["Another one?"])]
    # the breakpoint moved to the last completed turn
    assert sent.messages[1]["content"][0]["cache_control"] == {"type": "ephemeral",
                                                               "ttl": "5m"}
    # exactly the payload the backend renders for the turn's request
    assert {"messages": list(sent.messages), **sent.params} == backend.payload(
        _request_of(engine, store, second))

    # usage as the server reported it: llama-server counts the prompt tokens its own prompt
    # cache held as cache_read_input_tokens, and reports no cache writes
    usage = call.response["usage"]
    assert set(usage) == {"input_tokens", "cache_read_input_tokens", "output_tokens"}
    assert usage["cache_read_input_tokens"] > 900  # the system prompt and the first turn
    assert call.usage.prompt_tokens == usage["input_tokens"] + usage["cache_read_input_tokens"]
    assert call.usage.cached_tokens == usage["cache_read_input_tokens"]
    assert 0 < call.usage.completion_tokens == usage["output_tokens"] <= 16
    assert call.response["stop_reason"] in ("end_turn", "max_tokens")
    assert call.response["endpoint"] == llama_server.url and call.timings.ttft_ms is not None
    store.close()


def _request_of(engine: Engine, store: SQLiteStore, result: Any) -> Any:
    """The request the engine assembled for ``result``'s call (its history before the reply)."""
    history = store.history(result.conversation_id)
    return engine.assembler(result.conversation_id, "main")(
        [i for i in history if i.seq < result.reply.seq])


def test_a_recorded_tool_call_and_result_go_to_the_server_as_blocks(
        llama_server: LlamaServer, tmp_path: Path) -> None:
    """SmolLM2's chat template has no tools, so llama-server leaves them out of the prompt and
    never answers with tool_use (reading tool_use from a stream is tested against Anthropic's
    event shapes in test_anthropic_errors.py); what it does take is the blocks themselves."""
    weather = Tool("weather", "The weather in a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]}, lambda args, ctx: f"Sunny in {args['city']}.")
    # a recorded tool call and its result, answered by the real server as tool_use and
    # tool_result blocks
    store = SQLiteStore(tmp_path / "t.db")
    scripted = ScriptedModel([ToolCalls.of(("weather", {"city": "Lisbon"})), "It is sunny."])
    first = Engine(store, scripted, system="Use the tools.", tools=[weather]).run_turn(
        "What is the weather in Lisbon?")
    engine = Engine(store, _backend(llama_server), system="Use the tools.", tools=[weather])
    second = engine.run_turn("And tomorrow?", conversation_id=first.conversation_id)
    sent = store.call(second.call.id).request
    assert sent is not None
    blocks = [(m["role"], b["type"]) for m in sent.messages for b in m["content"]]
    assert blocks[:3] == [("user", "text"), ("assistant", "tool_use"), ("user", "tool_result")]
    assert sent.params["tools"][0]["name"] == "weather"
    assert store.history(first.conversation_id)[-1].kind is ItemKind.ASSISTANT
    store.close()


def test_a_request_over_the_servers_window_fails_as_too_long_and_is_recorded(
        llama_server: LlamaServer, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    engine = Engine(store, _backend(llama_server))
    huge = "Tell me about the sea. " * 1500  # ~7,500 tokens, past the 4,096 the slot holds
    with pytest.raises(PromptTooLong, match="too long") as raised:
        engine.run_turn(huge, client_msg_id="big")
    assert raised.value.exit_code == 6 and "exceed" in raised.value.message
    cid = store.conversations()[0].conversation.id
    (failed,) = store.calls(cid)
    assert failed.status is CallStatus.FAILED
    recorded = store.call(failed.id).request
    assert recorded is not None and recorded.messages[0]["content"][0]["text"] == huge
    assert [i.kind for i in store.history(cid)] == [ItemKind.USER]
    store.close()


def test_a_wrong_key_is_refused_by_the_server_and_the_turn_answered_with_the_right_one(
        llama_server: LlamaServer, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    with pytest.raises(ProviderAuthFailed, match="did not accept the API key") as raised:
        Engine(store, _backend(llama_server, api_key="wrong")).run_turn("hi", client_msg_id="k")
    assert raised.value.status == 401 and "ANTHROPIC_API_KEY" in (raised.value.hint or "")
    retried = Engine(store, _backend(llama_server)).run_turn("hi", client_msg_id="k")
    assert retried.reply.text.strip()
    cid = retried.conversation_id
    assert [c.status for c in store.calls(cid)] == [CallStatus.FAILED, CallStatus.OK]
    assert [i.kind for i in store.history(cid)] == [ItemKind.USER, ItemKind.ASSISTANT]
    store.close()
