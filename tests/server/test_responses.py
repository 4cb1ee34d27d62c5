"""The Responses API subset, driven by the official ``openai`` SDK: a response id is a point in
a branch, chaining from it continues there (or forks, if it is no longer the newest), and the
state lives on the server."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from openai import BadRequestError, ConflictError, NotFoundError, OpenAI

from threadline.engine import Engine
from threadline.errors import ModelCallFailed
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.request import Request
from threadline.server import responses as responses_module
from threadline.server.app import create_app
from threadline.stores.base import Store

STREAM_EVENTS = ["response.created", "response.in_progress", "response.output_item.added",
                 "response.content_part.added", "response.output_text.delta",
                 "response.output_text.done", "response.content_part.done",
                 "response.output_item.done", "response.completed"]


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
def engine(store: Store, model: ScriptedModel) -> Engine:
    return Engine(store, model)


@pytest.fixture
def http(engine: Engine) -> TestClient:
    return TestClient(create_app(engine))


@pytest.fixture
def sdk(http: TestClient) -> OpenAI:
    return OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=http,
                  max_retries=0)


def _threadline(response: Any) -> dict[str, Any]:
    found: dict[str, Any] = response.model_extra["threadline"]
    return found


def _counts(store: Store) -> tuple[int, int, int]:
    summaries = store.conversations()
    return (len(summaries), sum(s.items for s in summaries), sum(s.branches for s in summaries))


def _types(events: list[Any]) -> list[str]:
    """Event types in order, runs of deltas as one."""
    out: list[str] = []
    for event in events:
        if not (out and out[-1] == event.type == "response.output_text.delta"):
            out.append(event.type)
    return out


def test_a_chain_of_responses_is_one_conversation_that_reuses_its_prefix(
        sdk: OpenAI, store: Store) -> None:
    raw = sdk.responses.with_raw_response.create(model="any", input="My name is Ada.",
                                                 instructions="You are terse.")
    first = raw.parse()
    cid = raw.headers["X-Threadline-Conversation"]
    assert raw.headers["X-Threadline-Branch"] == "main"
    assert first.id.startswith("resp_") and first.status == "completed"
    assert first.output_text.startswith("(scripted reply 1)")
    assert first.instructions == "You are terse." and first.previous_response_id is None
    second = sdk.responses.create(model="any", input="What is my name?",
                                  previous_response_id=first.id)  # instructions carried
    third = sdk.responses.create(model="any", previous_response_id=second.id,
                                 instructions="You are terse.",
                                 input=[{"role": "user", "content": [
                                     {"type": "input_text", "text": "And again?"}]}])
    assert second.output_text.startswith("(scripted reply 2)")
    assert third.output_text.startswith("(scripted reply 3)")
    assert (second.previous_response_id, third.previous_response_id) == (first.id, second.id)
    assert second.instructions == "You are terse."
    assert {_threadline(r)["conversation_id"] for r in (second, third)} == {cid}
    assert [_threadline(r)["turn"] for r in (first, second, third)] == [1, 2, 3]
    assert store.conversation(cid).system == "You are terse."
    assert [i.text for i in store.history(cid)][0::2] == [
        "My name is Ada.", "What is my name?", "And again?"]
    calls = store.calls(cid)
    assert [c.id for c in calls] == [_threadline(r)["call_id"] for r in (first, second, third)]
    assert calls[0].usage.cached_tokens == 0
    assert all(c.usage.cached_tokens > 0 for c in calls[1:])  # the prefix was reused
    assert third.usage is not None
    assert third.usage.input_tokens_details.cached_tokens == calls[2].usage.cached_tokens
    assert third.usage.input_tokens == calls[2].usage.prompt_tokens
    assert third.usage.total_tokens == third.usage.input_tokens + third.usage.output_tokens
    assert [item.id for item in third.output] == ["msg_" + third.id.removeprefix("resp_")]


def test_streaming_with_create_and_with_stream(sdk: OpenAI, store: Store) -> None:
    events = list(sdk.responses.create(model="any", input="Stream it", stream=True))
    assert _types(events) == STREAM_EVENTS
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1  # streamed as it was generated, not at the end
    created, completed = events[0], events[-1]
    assert created.type == "response.created" and completed.type == "response.completed"
    assert created.response.id == completed.response.id
    assert created.response.status == "in_progress"
    assert "".join(deltas) == completed.response.output_text
    assert completed.response.output_text.startswith("(scripted reply 1)")
    stored = sdk.responses.retrieve(completed.response.id)
    assert stored.output_text == completed.response.output_text
    cid = _threadline(completed.response)["conversation_id"]
    assert store.history(cid)[-1].text == completed.response.output_text

    with sdk.responses.stream(model="any", input="And now?",
                              previous_response_id=completed.response.id) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert final.output_text == text and text.startswith("(scripted reply 2)")
    assert _threadline(final)["conversation_id"] == cid
    assert final.previous_response_id == completed.response.id


def test_a_stream_dropped_early_still_keeps_its_response(store: Store) -> None:
    reply = " ".join(f"w{n}" for n in range(60))
    http = TestClient(create_app(Engine(store, ScriptedModel([reply], token_delay_s=0.01))))
    with http.stream("POST", "/v1/responses", json={"input": "Long answer.",
                                                    "stream": True}) as stream:
        created = next(json.loads(line.removeprefix("data: ")) for line in stream.iter_lines()
                       if line.startswith("data: "))  # then the client goes away
    response_id = created["response"]["id"]
    deadline = time.monotonic() + 20
    while (got := http.get(f"/v1/responses/{response_id}")).status_code == 404:
        assert time.monotonic() < deadline, "the turn did not finish without its client"
        time.sleep(0.05)
    assert got.json()["output"][0]["content"][0]["text"] == reply


@contextmanager
def _served(app: FastAPI) -> Iterator[str]:
    """``app`` behind a real uvicorn server on a free port, so a client can hang up on a
    stream and carry on while the app is still sending it."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def test_a_store_false_stream_left_early_is_deleted_when_its_turn_ends(store: Store) -> None:
    """The turn goes on without its client: its conversation is there until the turn ends (a
    request refused meanwhile writes nothing), then it is deleted, as store=false says."""
    asked, release = threading.Event(), threading.Event()

    def held(request: Request) -> str:
        asked.set()
        release.wait(timeout=20)
        return "a reply nobody reads"

    with _served(create_app(Engine(store, ScriptedModel(default=held)))) as base:
        try:
            _hang_up_then_refuse(base, store, asked)
        finally:
            release.set()
        deadline = time.monotonic() + 20
        while store.conversations():
            assert time.monotonic() < deadline, "the turn did not end without its client"
            time.sleep(0.05)


def _hang_up_then_refuse(base: str, store: Store, asked: threading.Event) -> None:
    """While the turn is held at its model: its client hangs up, and a refusal writes nothing."""
    with httpx.stream("POST", f"{base}/v1/responses", timeout=20,
                      json={"input": "Hi.", "store": False, "stream": True}) as stream:
        assert next(stream.iter_lines()) == "event: response.created"
    assert asked.wait(timeout=20), "the turn did not reach the model"
    running = _counts(store)
    assert running[0] == 1, "the turn's conversation is kept while it runs"
    refused = httpx.post(f"{base}/v1/responses", timeout=20,
                         json={"input": "Hi.", "tools": [{"type": "function"}]})
    assert refused.status_code == 400, refused.text
    assert _counts(store) == running


def test_chaining_from_an_older_response_forks_a_branch(sdk: OpenAI, store: Store) -> None:
    first = sdk.responses.create(model="any", input="I live in Paris.")
    second = sdk.responses.create(model="any", input="Where do I live?",
                                  previous_response_id=first.id)
    cid = _threadline(first)["conversation_id"]
    main_before = [i.text for i in store.history(cid)]
    forked = sdk.responses.create(model="any", input="Where do I work?",
                                  previous_response_id=first.id)
    branch = _threadline(forked)["branch"]
    assert branch != "main" and _threadline(forked)["conversation_id"] == cid
    assert forked.output_text.startswith("(scripted reply 2)")  # it saw only the first turn
    assert [i.text for i in store.history(cid)] == main_before  # the original is intact
    assert [i.text for i in store.history(cid, branch)] == [
        "I live in Paris.", first.output_text, "Where do I work?", forked.output_text]
    assert store.calls(cid, branch=branch)[0].usage.cached_tokens > 0  # the prefix is shared

    on_fork = sdk.responses.create(model="any", input="Still there?",
                                   previous_response_id=forked.id)
    on_main = sdk.responses.create(model="any", input="Still in Paris?",
                                   previous_response_id=second.id)
    assert _threadline(on_fork)["branch"] == branch  # each newest response continues its own
    assert _threadline(on_main)["branch"] == "main"
    assert len(store.branches(cid)) == 2


def test_a_response_answered_meanwhile_sends_the_next_one_to_a_fork(
        sdk: OpenAI, store: Store, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    first = sdk.responses.create(model="any", input="Hello.")
    cid = _threadline(first)["conversation_id"]
    place = responses_module._place

    def then_another_turn(*args: Any) -> Any:
        found = place(*args)  # the newest: it continues main ...
        engine.run_turn("Sneaked in.", conversation_id=cid)  # ... until this goes in first
        return found

    monkeypatch.setattr(responses_module, "_place", then_another_turn)
    late = sdk.responses.create(model="any", input="After hello.",
                                previous_response_id=first.id)
    branch = _threadline(late)["branch"]
    assert branch != "main"
    assert [i.text for i in store.history(cid, branch)][0::2] == ["Hello.", "After hello."]
    assert [i.text for i in store.history(cid)][0::2] == ["Hello.", "Sneaked in."]
    assert sum(1 for b in ("main", branch) for i in store.history(cid, b)
               if i.text == "After hello.") == 1  # written once, where it was answered


def test_get_and_delete(sdk: OpenAI, store: Store, http: TestClient) -> None:
    first = sdk.responses.create(model="any", input="Remember 42.", metadata={"k": "v"})
    second = sdk.responses.create(model="any", input="What number?",
                                  previous_response_id=first.id)
    got = sdk.responses.retrieve(second.id)
    assert (got.id, got.output_text, got.previous_response_id) == (
        second.id, second.output_text, first.id)
    assert got.usage == second.usage and got.created_at == second.created_at
    assert sdk.responses.retrieve(first.id).metadata == {"k": "v"}
    cid = _threadline(first)["conversation_id"]
    assert http.get(f"/v1/responses/{first.id}").headers["X-Threadline-Conversation"] == cid

    deleted = http.delete(f"/v1/responses/{first.id}")
    assert deleted.status_code == 200
    assert deleted.json() == {"id": first.id, "object": "response", "deleted": True}
    with pytest.raises(NotFoundError, match="was deleted"):
        sdk.responses.retrieve(first.id)
    before = _counts(store)
    with pytest.raises(NotFoundError, match="was deleted"):
        sdk.responses.create(model="any", input="again", previous_response_id=first.id)
    assert _counts(store) == before
    assert http.delete(f"/v1/responses/{first.id}").status_code == 404
    # the log keeps what later responses stand on: the chain after it goes on
    assert [i.text for i in store.history(cid)][0::2] == ["Remember 42.", "What number?"]
    third = sdk.responses.create(model="any", input="Still?", previous_response_id=second.id)
    assert third.output_text.startswith("(scripted reply 3)")

    assert http.delete(f"/v1/conversations/{cid}").status_code == 204
    missing = http.get(f"/v1/responses/{second.id}")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == f"no response with id {second.id!r}"
    assert http.get("/v1/responses/resp_nothing").status_code == 404
    assert http.delete("/v1/responses/resp_nothing").status_code == 404


def test_a_new_conversation_takes_its_history_and_system_prompt_from_input(
        sdk: OpenAI, store: Store, model: ScriptedModel) -> None:
    reply = sdk.responses.create(model="any", instructions="Be brief.", input=[
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "I am Ada."},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Bonjour Ada.", "annotations": []}]},
        {"role": "user", "content": [{"type": "input_text", "text": "Who am I?"}]}])
    cid = _threadline(reply)["conversation_id"]
    assert store.conversation(cid).system == "Be brief.\n\nAnswer in French."
    assert [(i.kind, i.text) for i in store.history(cid)][:3] == [
        (ItemKind.USER, "I am Ada."), (ItemKind.ASSISTANT, "Bonjour Ada."),
        (ItemKind.USER, "Who am I?")]
    assert [m["content"] for m in model.requests[-1].openai_messages()] == [
        "Be brief.\n\nAnswer in French.", "I am Ada.", "Bonjour Ada.", "Who am I?"]
    assert reply.output_text.startswith("(scripted reply 2)")
    assert reply.instructions == "Be brief."


def test_store_false_keeps_nothing(sdk: OpenAI, store: Store, model: ScriptedModel,
                                   http: TestClient) -> None:
    # what a client that keeps its own history sends (the llm CLI does): all of it, each time
    history = [{"role": "user", "content": "I am Ada."},
               {"role": "assistant", "content": "Hello Ada."},
               {"role": "user", "content": "Who am I?"}]
    reply = sdk.responses.create(model="any", input=history, instructions="Be brief.",
                                 store=False)
    assert reply.output_text.startswith("(scripted reply 2)")
    assert [m["content"] for m in model.requests[-1].openai_messages()] == [
        "Be brief.", "I am Ada.", "Hello Ada.", "Who am I?"]
    assert reply.model_extra["store"] is False
    assert store.conversations() == []
    with pytest.raises(NotFoundError):
        sdk.responses.retrieve(reply.id)
    events = list(sdk.responses.create(model="any", input=history, store=False, stream=True))
    assert events[-1].type == "response.completed"
    assert store.conversations() == []
    failing = ScriptedModel([RuntimeError("model down")])
    down = TestClient(create_app(Engine(store, failing)))
    assert down.post("/v1/responses", json={"input": "hi", "store": False}).status_code == 502
    assert store.conversations() == []  # a failed one is not kept either
    kept = sdk.responses.create(model="any", input="Keep this.")
    before = _counts(store)
    with pytest.raises(BadRequestError, match="store=false cannot continue"):
        sdk.responses.create(model="any", input="x", previous_response_id=kept.id,
                             store=False)
    assert _counts(store) == before


def test_a_retried_request_returns_the_first_response(sdk: OpenAI, store: Store) -> None:
    key = {"Idempotency-Key": "order-1"}
    once = sdk.responses.create(model="any", input="Pay.", extra_headers=key)
    again = sdk.responses.create(model="any", input="Pay.", extra_headers=key)
    assert (again.id, again.output_text) == (once.id, once.output_text)
    assert _threadline(again)["deduplicated"] is True
    assert len(store.conversations()) == 1
    cid = _threadline(once)["conversation_id"]
    more = {"Idempotency-Key": "order-2"}
    follow = sdk.responses.create(model="any", input="Ship.", previous_response_id=once.id,
                                  extra_headers=more)
    events = list(sdk.responses.create(model="any", input="Ship.", stream=True,
                                       previous_response_id=once.id, extra_headers=more))
    assert _types(events) == STREAM_EVENTS
    completed = events[-1]
    assert completed.type == "response.completed"
    assert events[0].response.id == completed.response.id == follow.id
    assert completed.response.output_text == follow.output_text
    assert [i.text for i in store.history(cid)][0::2] == ["Pay.", "Ship."]
    with pytest.raises(BadRequestError, match="already used"):
        sdk.responses.create(model="any", input="Refund.", extra_headers=key)
    other = sdk.responses.create(model="any", input="Elsewhere.")
    with pytest.raises(BadRequestError, match="already used"):
        sdk.responses.create(model="any", input="Pay.", previous_response_id=other.id,
                             extra_headers=key)
    sdk.responses.delete(once.id)
    with pytest.raises(NotFoundError, match="was deleted"):
        sdk.responses.create(model="any", input="Pay.", extra_headers=key)
    assert [i.text for i in store.history(cid)][0::2] == ["Pay.", "Ship."]


def test_two_sends_of_one_key_that_race_leave_one_conversation(
        sdk: OpenAI, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both sends look for the key before either wrote it (as two concurrent requests do),
    so each places its turn in a new conversation; the second's turn finds the key taken:
    the conversation it made goes again, and it answers 409 (a retry returns the first's
    response), or 400 where the key went with another message."""
    key = {"Idempotency-Key": "race-1"}
    once = sdk.responses.create(model="any", input="Pay.", extra_headers=key)
    cid = _threadline(once)["conversation_id"]
    looked, misses = responses_module._retried, [None]  # the next look misses, as in a race
    monkeypatch.setattr(responses_module, "_retried",
                        lambda *args: misses.pop() if misses else looked(*args))
    with pytest.raises(ConflictError, match="was being answered") as refused:
        sdk.responses.create(model="any", input=[
            {"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": "Pay."}], extra_headers=key)
    assert refused.value.status_code == 409
    # nothing of the second was kept
    assert [c.conversation.id for c in store.conversations()] == [cid]
    with pytest.raises(BadRequestError, match="already used"):
        sdk.responses.create(model="any", input="Refund.", extra_headers=key)
    assert [c.conversation.id for c in store.conversations()] == [cid]
    again = sdk.responses.create(model="any", input="Pay.", extra_headers=key)
    assert (again.id, again.output_text) == (once.id, once.output_text)


def test_a_failed_turn_is_an_error_and_a_retry_answers_it(store: Store) -> None:
    model = ScriptedModel([RuntimeError("model down"), RuntimeError("still down")])
    http = TestClient(create_app(Engine(store, model)))
    sdk = OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=http,
                 max_retries=0)
    key = {"Idempotency-Key": "q-1"}
    failed = http.post("/v1/responses", json={"input": "Question?"}, headers=key)
    assert failed.status_code == 502
    assert failed.json()["error"]["type"] == ModelCallFailed.__name__
    events = list(sdk.responses.create(model="any", input="Question?", stream=True,
                                       extra_headers=key))
    assert [e.type for e in events] == ["response.created", "response.in_progress",
                                        "response.failed"]
    failure = events[-1].response
    assert failure.status == "failed" and failure.error is not None
    assert "still down" in failure.error.message and failure.error.code == "server_error"
    with pytest.raises(NotFoundError):
        sdk.responses.retrieve(failure.id)  # nothing answered, nothing kept
    answered = sdk.responses.create(model="any", input="Question?", extra_headers=key)
    cid = _threadline(answered)["conversation_id"]
    assert [i.text for i in store.history(cid)] == ["Question?", answered.output_text]
    assert len(store.conversations()) == 1
    assert sdk.responses.retrieve(answered.id).output_text == answered.output_text


def test_instructions_cannot_change_along_a_chain(sdk: OpenAI, store: Store) -> None:
    first = sdk.responses.create(model="any", input="Hi.", instructions="Be terse.")
    before = _counts(store)
    with pytest.raises(BadRequestError, match="instructions differ"):
        sdk.responses.create(model="any", input="Hi again.", instructions="Be chatty.",
                             previous_response_id=first.id)
    assert _counts(store) == before


HI = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"input": "hi", "previous_response_id": "resp_missing"}, 404, "no response with id"),
    ({"input": []}, 400, "input is an empty list"),
    ({"input": "   "}, 400, "input: the message is empty"),
    ({"input": [{"role": "user", "content": ""}]}, 400, r"input\[0\]: the message is empty"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": "4"}]}, 400,
     r"input\[0\] is a 'function_call_output' item"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     400, r"input\[0\]\.content\[0\] is a 'input_image' part"),
    ({"input": [{"role": "user", "content": 7}]}, 400, "must be a string or a list"),
    ({"input": [{"role": "tool", "content": "x"}]}, 400, "has role 'tool'"),
    ({"input": [HI, {"role": "assistant", "content": "hello"}]}, 400,
     "the last item of input must be the new user message"),
    ({"input": [{"role": "system", "content": "only this"}]}, 400,
     "the last item of input must be the new user message"),
    ({"input": [HI, {"role": "system", "content": "late"}, HI]}, 400,
     r"input\[1\] is a system message after the conversation has begun"),
    ({"input": "hi", "tools": [{"type": "function", "name": "f"}]}, 400,
     "client-side tools are not supported"),
    ({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {}}}},
     400, "text.format 'json_schema' is not supported"),
    ({"input": "hi", "background": True}, 400, "background responses are not supported"),
    ({"input": "hi", "conversation": "conv_1"}, 400, "conversation parameter"),
    ({"input": 5}, 422, "input"),
    ({"model": "any"}, 422, "input"),
])
def test_bad_requests_are_refused_and_change_nothing(http: TestClient, store: Store,
                                                     body: dict[str, Any], status: int,
                                                     message: str) -> None:
    http.post("/v1/responses", json={"input": "a conversation to leave as it is"})
    before = _counts(store)
    got = http.post("/v1/responses", json=body, headers={"Idempotency-Key": "bad-1"})
    assert got.status_code == status, got.text
    error = got.json()["error"]
    assert set(error) == {"type", "message", "hint"}
    assert re.search(message, error["message"]), error["message"]
    assert _counts(store) == before


def test_continuing_takes_only_the_new_message(sdk: OpenAI, store: Store,
                                               http: TestClient) -> None:
    first = sdk.responses.create(model="any", input="Hi.")
    before = _counts(store)
    for extra in ([{"role": "assistant", "content": "earlier"}, HI],
                  [{"role": "developer", "content": "new rules"}, HI]):
        got = http.post("/v1/responses", json={"input": extra,
                                               "previous_response_id": first.id})
        assert got.status_code == 400
        assert "input is the new user message only" in got.json()["error"]["message"]
    assert http.post("/v1/responses", json={"input": "x", "previous_response_id": first.id},
                     headers={"Idempotency-Key": " "}).status_code == 400
    assert _counts(store) == before


@pytest.mark.slow
def test_the_llm_cli_talks_to_it_as_a_responses_model(tmp_path: Path) -> None:
    pytest.importorskip("llm", reason="the llm CLI is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "llm").mkdir()
    (tmp_path / "llm" / "extra-openai-models.yaml").write_text(
        f'- model_id: tl\n  model_name: any\n  api_base: "http://127.0.0.1:{port}/v1"\n'
        "  responses: true\n")
    env = {**os.environ, "THREADLINE_HOME": str(tmp_path / "home"),
           "THREADLINE_MODEL": "scripted", "LLM_USER_PATH": str(tmp_path / "llm")}
    server = subprocess.Popen([sys.executable, "-m", "threadline", "serve", "--port",
                               str(port)], env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"

    def llm(*args: str) -> str:
        done = subprocess.run([str(Path(sys.executable).parent / "llm"), *args], env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    try:
        for _ in range(100):
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        assert llm("-m", "tl", "Hello there") == "(scripted reply 1) You said: Hello there"
        assert llm("-m", "tl", "--no-stream", "-s", "Be brief.", "I am Ada.").startswith(
            "(scripted reply 1)")
        # llm keeps the history and sends all of it, with store=false: the server keeps none
        assert llm("-c", "Who am I?") == "(scripted reply 2) You said: Who am I?"
        assert httpx.get(f"{base}/v1/conversations").json() == []
    finally:
        server.terminate()
        server.wait(timeout=10)
