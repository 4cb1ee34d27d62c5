"""How the Anthropic backend maps a provider's errors, and that a failed turn is recorded (with
the payload as sent) and can be answered again; and a tool_use block read from a stream in
Anthropic's event shapes (the local model's chat template has no tools, so the real server
never sends one).

The errors a real server cannot be made to produce on demand (529 overloaded, 429 with
``retry-after``, an error event in the middle of a stream, a provider's "prompt is too long")
come from a tiny HTTP stub on 127.0.0.1 that answers with a fixed status and body: unit tests
of the mapping, not of a server. Context too long and a bad key are also tested against the
real llama-server (``test_anthropic_server.py``)."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from threadline.calls import CallStatus
from threadline.engine import Engine
from threadline.errors import (
    ModelUnavailable,
    PromptTooLong,
    ProviderAuthFailed,
    ProviderError,
    ProviderOverloaded,
    ProviderRateLimited,
)
from threadline.models.anthropic_messages import AnthropicModel
from threadline.models.llama_server import free_port
from threadline.stores.sqlite import SQLiteStore

pytest.importorskip("anthropic")

Reply = tuple[int, dict[str, str], bytes]


def _error(kind: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _streamed_reply(text: str) -> Reply:
    usage = {"input_tokens": 7, "cache_creation_input_tokens": 1200,
             "cache_read_input_tokens": 3000, "output_tokens": 0}
    body = _sse(
        {"type": "message_start", "message": {"id": "msg_1", "type": "message",
                                              "role": "assistant", "content": [],
                                              "model": "claude-sonnet-4-6", "stop_reason": None,
                                              "stop_sequence": None, "usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                       "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                               "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 3}},
        {"type": "message_stop"})
    return 200, {"content-type": "text/event-stream"}, body


class Stub:
    """Answers each POST with the next queued reply; records what it was sent."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.received: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                size = int(self.headers.get("content-length", 0))
                stub.received.append(json.loads(self.rfile.read(size)))
                status, headers, body = stub.replies.popleft()
                self.send_response(status)
                for name, value in {"content-type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    yield server
    server.server.shutdown()


def _engine(tmp_path: Path, url: str) -> tuple[Engine, SQLiteStore]:
    store = SQLiteStore(tmp_path / "t.db")
    return Engine(store, AnthropicModel("claude-sonnet-4-6", base_url=url,
                                        api_key="sk-test")), store


CASES = [
    ((529, {}, _error("overloaded_error", "Overloaded")), ProviderOverloaded, 7,
     "is overloaded"),
    ((429, {"retry-after": "17"}, _error("rate_limit_error", "Number of request tokens has "
                                         "exceeded your per-minute rate limit")),
     ProviderRateLimited, 7, "retry in 17 s"),
    ((401, {}, _error("authentication_error", "invalid x-api-key")), ProviderAuthFailed, 6,
     "did not accept the API key"),
    ((403, {}, _error("permission_error", "not allowed")), ProviderAuthFailed, 6,
     "did not accept the API key"),
    ((400, {}, _error("invalid_request_error", "prompt is too long: 210345 tokens > 200000 "
                                               "maximum")), PromptTooLong, 6, "too long"),
    ((413, {}, _error("request_too_large", "Request exceeds the maximum size")), PromptTooLong,
     6, "too long"),
    ((404, {}, _error("not_found_error", "model: claude-nope")), ModelUnavailable, 6,
     "has no model"),
    ((500, {}, _error("api_error", "Internal server error")), ProviderError, 6,
     "refused the call"),
    # an error event in the middle of a 200 stream: its type, not the status, says what it is
    ((200, {"content-type": "text/event-stream"},
      _sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
     ProviderOverloaded, 7, "is overloaded"),
]


@pytest.mark.parametrize(("reply", "error", "exit_code", "says"), CASES,
                         ids=[f"{c[0][0]}-{c[1].__name__}" for c in CASES])
def test_each_error_is_mapped_recorded_with_its_payload_and_retryable(
        stub: Stub, tmp_path: Path, reply: Reply, error: type[Exception], exit_code: int,
        says: str) -> None:
    engine, store = _engine(tmp_path, stub.url)
    stub.replies.extend([reply, _streamed_reply("Recovered.")])
    with pytest.raises(error, match=says) as raised:
        engine.run_turn("hello", client_msg_id="m-1")
    assert type(raised.value) is error and raised.value.exit_code == exit_code
    assert raised.value.hint  # what to do about it
    if isinstance(raised.value, ProviderRateLimited):
        assert raised.value.retry_after_s == 17
    cid = store.conversations()[0].conversation.id
    (failed,) = store.calls(cid)
    assert failed.status is CallStatus.FAILED and failed.reply_seq is None
    recorded = store.call(failed.id).request
    assert recorded is not None  # the Anthropic payload exactly as sent, not a stand-in
    assert {"model": recorded.params["model"], "messages": list(recorded.messages),
            **recorded.params} == stub.received[0]
    assert error.__name__ in (failed.error or "")
    # answered again: the message is not sent twice, the reply lands, usage as reported
    retried = engine.run_turn("hello", client_msg_id="m-1")
    assert retried.reply.text == "Recovered." and not retried.deduplicated
    assert [i.kind.value for i in store.history(cid)] == ["user_message", "assistant_message"]
    assert stub.received[1]["messages"] == stub.received[0]["messages"]
    assert (retried.call.usage.prompt_tokens, retried.call.usage.cached_tokens,
            retried.call.usage.completion_tokens) == (7 + 1200 + 3000, 3000, 3)
    assert store.call(retried.call.id).response["usage"] == {
        "input_tokens": 7, "cache_creation_input_tokens": 1200,
        "cache_read_input_tokens": 3000, "output_tokens": 3}
    store.close()


def test_a_server_that_is_not_there_is_unavailable(tmp_path: Path) -> None:
    engine, store = _engine(tmp_path, f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ModelUnavailable, match="could not be reached") as raised:
        engine.run_turn("anyone?")
    assert "THREADLINE_ANTHROPIC_BASE_URL" in (raised.value.hint or "")
    (failed,) = store.calls(store.conversations()[0].conversation.id)
    assert failed.status is CallStatus.FAILED
    store.close()


def _tool_use_reply() -> Reply:
    """A streamed reply in Anthropic's event shapes: a sentence, then a tool_use block whose
    input arrives as JSON in two pieces."""
    usage = {"input_tokens": 50, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0, "output_tokens": 0}
    body = _sse(
        {"type": "message_start", "message": {"id": "msg_2", "type": "message",
                                              "role": "assistant", "content": [],
                                              "model": "claude-sonnet-4-6", "stop_reason": None,
                                              "stop_sequence": None, "usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                       "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                               "text": "Let me look."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "tool_use", "id": "toolu_01", "name": "weather",
                           "input": {}}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Lis"}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": "bon\"}"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 20}},
        {"type": "message_stop"})
    return 200, {"content-type": "text/event-stream"}, body


def test_a_tool_use_block_is_run_and_its_result_sent_back_as_a_tool_result(
        stub: Stub, tmp_path: Path) -> None:
    from threadline.turn.tools import Tool

    ran: list[object] = []

    def weather(args: Any, ctx: Any) -> str:
        ran.append(dict(args))
        return "Sunny."

    tool = Tool("weather", "The weather in a city.", {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        weather)
    store = SQLiteStore(tmp_path / "t.db")
    engine = Engine(store, AnthropicModel("claude-sonnet-4-6", base_url=stub.url,
                                          api_key="sk-test"), tools=[tool])
    stub.replies.extend([_tool_use_reply(), _streamed_reply("It is sunny in Lisbon.")])
    pieces: list[str] = []
    result = engine.run_turn("Weather in Lisbon?", on_text=pieces.append)
    assert ran == [{"city": "Lisbon"}] and result.reply.text == "It is sunny in Lisbon."
    assert "".join(pieces) == "Let me look.It is sunny in Lisbon."
    kinds = [i.kind.value for i in store.history(result.conversation_id)]
    assert kinds == ["user_message", "tool_call", "tool_result", "assistant_message"]
    assert stub.received[0]["tools"][0]["name"] == "weather"
    again = stub.received[1]["messages"]
    assert [m["role"] for m in again] == ["user", "assistant", "user"]
    assert again[1]["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Lisbon"}}]
    (answer,) = again[2]["content"]
    assert answer["type"] == "tool_result" and answer["tool_use_id"] == "toolu_01"
    assert "Sunny." in answer["content"]
    store.close()


class RemoteProtocolError(Exception):
    """Named as httpx names the error of a connection closed before its response."""


def test_only_a_connection_closed_before_any_response_is_sent_again() -> None:
    from threadline.models.base import closed_while_idle

    idle = ConnectionError("Connection error.")
    idle.__cause__ = RemoteProtocolError("Server disconnected without sending a response.")
    assert closed_while_idle(idle)
    refused = ConnectionError("Connection error.")
    refused.__cause__ = ConnectionRefusedError("[Errno 111] Connection refused")
    assert not closed_while_idle(refused)  # no server: sending again would not help
    midway = ConnectionError("Connection error.")
    midway.__cause__ = RemoteProtocolError("peer closed connection without sending complete "
                                           "message body")
    assert not closed_while_idle(midway)  # it was answering: the call failed


def test_a_call_whose_idle_connection_was_closed_is_made_once_more_and_only_once() -> None:
    from threadline.models.base import sent_again_if_closed

    calls: list[int] = []

    def closed_then(answer: str, failures: int) -> str:
        calls.append(1)
        if len(calls) <= failures:
            err = ConnectionError("Connection error.")
            err.__cause__ = RemoteProtocolError("Server disconnected without sending a "
                                                "response.")
            raise err
        return answer

    assert sent_again_if_closed(lambda: closed_then("ok", 1), ConnectionError) == "ok"
    assert len(calls) == 2
    calls.clear()
    with pytest.raises(ConnectionError):  # closed twice: the call fails
        sent_again_if_closed(lambda: closed_then("ok", 2), ConnectionError)
    assert len(calls) == 2
