"""The HTTP service: every endpoint, streaming, retries, and errors that change nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from threadline.engine import Engine
from threadline.models.scripted import ScriptedModel
from threadline.server.app import create_app
from threadline.stores.base import Store
from threadline.stores.sqlite import SQLiteStore


@pytest.fixture
def client(store: Store) -> TestClient:
    return TestClient(create_app(Engine(store, ScriptedModel())))


def _new(client: TestClient, **body: object) -> str:
    created = client.post("/v1/conversations", json=body)
    assert created.status_code == 201
    cid: str = created.json()["id"]
    return cid


def test_a_conversation_over_http(client: TestClient) -> None:
    cid = _new(client, system="You are terse.")
    first = client.post(f"/v1/conversations/{cid}/messages", json={"text": "Hello"}).json()
    assert first["turn"] == 1 and first["reply"].startswith("(scripted reply 1)")
    second = client.post(f"/v1/conversations/{cid}/messages", json={"text": "Again"}).json()
    assert second["turn"] == 2
    shown = client.get(f"/v1/conversations/{cid}").json()
    assert [i["kind"] for i in shown["items"]] == ["user_message", "assistant_message"] * 2
    assert shown["conversation"]["system"] == "You are terse."
    assert [c["id"] for c in client.get("/v1/conversations").json()] == [cid]
    calls = client.get(f"/v1/conversations/{cid}/calls").json()
    assert [c["call_id"] for c in calls] == [first["call_id"], second["call_id"]]
    exact = client.get(f"/v1/calls/{second['call_id']}", params={"request": True}).json()
    assert [m["content"] for m in exact["request"]["messages"]][-1] == "Again"
    fork = client.post(f"/v1/conversations/{cid}/fork", json={"from_seq": 2, "name": "alt"})
    assert fork.status_code == 201 and fork.json()["fork_seq"] == 2
    assert client.delete(f"/v1/conversations/{cid}").status_code == 204
    assert client.get(f"/v1/conversations/{cid}").status_code == 404


def test_a_retried_send_returns_the_first_result(client: TestClient,
                                                 store: Store) -> None:
    cid = _new(client)
    body = {"text": "Book it", "client_msg_id": "msg-1"}
    first = client.post(f"/v1/conversations/{cid}/messages", json=body).json()
    again = client.post(f"/v1/conversations/{cid}/messages", json=body).json()
    assert again["call_id"] == first["call_id"] and again["deduplicated"] is True
    assert len(store.history(cid)) == 2


def _parse(body: str) -> list[tuple[str, str | None, dict]]:
    """(event, id, data) for each server-sent event."""
    out = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((fields["event"], fields.get("id"), json.loads(fields["data"])))
    return out


def test_a_streamed_reply_arrives_as_server_sent_events(client: TestClient,
                                                        store: Store) -> None:
    cid = _new(client)
    with client.stream("POST", f"/v1/conversations/{cid}/messages",
                       json={"text": "Stream this", "stream": True}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _parse("".join(response.iter_text()))
    kinds = [kind for kind, _, _ in events]
    assert kinds[0] == "generation" and kinds[-1] == "done"
    assert set(kinds[1:-1]) == {"delta"}
    gid = events[0][2]["generation_id"]
    text = "".join(data["text"] for kind, _, data in events if kind == "delta")
    assert text == events[-1][2]["reply"]
    assert events[-2][1] == f"{gid}:{len(text)}"  # the offset after the last piece
    saved = store.generation(gid)
    assert saved is not None and saved.done and saved.text == text


def test_a_dropped_stream_resumes_elsewhere_without_running_the_model_again(
        make_store: Callable[[], Store]) -> None:
    model = ScriptedModel(token_delay_s=0.01)
    first = TestClient(create_app(Engine(make_store(), model)))
    cid = _new(first)
    reply = " ".join(f"w{n}" for n in range(80))
    model.enqueue(reply)
    received, last_id = "", None
    with first.stream("POST", f"/v1/conversations/{cid}/messages",
                      json={"text": "long answer please", "stream": True}) as response:
        lines = response.iter_lines()
        for line in lines:  # read a little, then the connection "drops"
            if line.startswith("id: "):
                last_id = line.removeprefix("id: ")
            elif line.startswith("data: ") and last_id is not None:
                received += json.loads(line.removeprefix("data: "))["text"]
                if len(received) > 20:
                    break
    assert last_id is not None
    gid = last_id.split(":")[0]
    replica = TestClient(create_app(Engine(make_store(), ScriptedModel())))
    resumed = replica.get(f"/v1/generations/{gid}/events",
                          headers={"Last-Event-ID": last_id})
    assert resumed.status_code == 200
    events = _parse(resumed.text)
    rest = "".join(data["text"] for kind, _, data in events if kind == "delta")
    assert events[-1][0] == "done" and received + rest == reply
    assert len(model.requests) == 1  # resuming ran nothing


def test_resuming_refuses_what_it_cannot_serve(client: TestClient) -> None:
    assert client.get("/v1/generations/gen_missing/events").status_code == 404
    cid = _new(client)
    with client.stream("POST", f"/v1/conversations/{cid}/messages",
                       json={"text": "hi", "stream": True}) as response:
        gid = _parse("".join(response.iter_text()))[0][2]["generation_id"]
    wrong = client.get(f"/v1/generations/{gid}/events", headers={"Last-Event-ID": "x:3"})
    assert wrong.status_code == 400 and "not an event of" in wrong.json()["error"]["message"]
    past = client.get(f"/v1/generations/{gid}/events", params={"offset": 10_000})
    assert past.status_code == 400 and "past the end" in past.json()["error"]["message"]
    whole = _parse(client.get(f"/v1/generations/{gid}/events").text)
    assert whole[-1][0] == "done"


@pytest.mark.parametrize("path, body, status, kind", [
    ("/v1/conversations/c_missing/messages", {"text": "hi"}, 404, "UnknownConversation"),
    ("/v1/conversations/{cid}/messages", {"text": "   "}, 400, "EmptyMessage"),
    ("/v1/conversations/{cid}/messages", {"text": "hi", "branch": "nope"}, 404,
     "UnknownBranch"),
    # a stream is refused before it starts, while it can still answer 404
    ("/v1/conversations/c_missing/messages", {"text": "hi", "stream": True}, 404,
     "UnknownConversation"),
    ("/v1/conversations/{cid}/messages", {"text": "hi", "branch": "nope", "stream": True}, 404,
     "UnknownBranch"),
    ("/v1/conversations/{cid}/fork", {"from_seq": 99}, 404, "UnknownItem"),
])
def test_errors_are_json_with_the_right_status_and_change_nothing(
        client: TestClient, store: Store, path: str, body: dict, status: int,
        kind: str) -> None:
    cid = _new(client)
    before = store.history(cid)
    response = client.post(path.format(cid=cid), json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["type"] == kind and error["message"]
    assert store.history(cid) == before and len(store.branches(cid)) == 1


def test_malformed_bodies_are_refused_by_schema(client: TestClient) -> None:
    cid = _new(client)
    response = client.post(f"/v1/conversations/{cid}/messages", content=b"{not json",
                           headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert client.post(f"/v1/conversations/{cid}/messages", json={}).status_code == 422
    spec = client.get("/openapi.json").json()
    assert "/v1/conversations/{conversation_id}/messages" in spec["paths"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_threadline_serve_is_a_real_http_server(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "THREADLINE_HOME": str(tmp_path / "home"),
           "THREADLINE_MODEL": "scripted"}
    server = subprocess.Popen([sys.executable, "-m", "threadline", "serve", "--port",
                               str(port)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        cid = httpx.post(f"{base}/v1/conversations", json={}).json()["id"]
        reply = httpx.post(f"{base}/v1/conversations/{cid}/messages",
                           json={"text": "over the wire"}).json()
        assert reply["turn"] == 1 and "over the wire" in reply["reply"]
    finally:
        server.terminate()
        server.wait(timeout=10)
    # the conversation outlives the server process
    store = SQLiteStore(tmp_path / "home" / "threadline.db")
    try:
        assert [i.text for i in store.history(cid)][0] == "over the wire"
    finally:
        store.close()


def test_a_busy_conversation_answers_409_with_retry_after(store: Store) -> None:
    import threading

    model = ScriptedModel(token_delay_s=0.02)
    client = TestClient(create_app(Engine(store, model)))
    cid = _new(client)
    model.enqueue(" ".join(f"w{n}" for n in range(60)))
    slow = threading.Thread(target=lambda: client.post(
        f"/v1/conversations/{cid}/messages", json={"text": "long one"}))
    slow.start()
    for _ in range(200):  # until the slow turn holds the lease and streams
        if store.history(cid):
            break
        time.sleep(0.01)
    time.sleep(0.1)
    refused = client.post(f"/v1/conversations/{cid}/messages",
                          json={"text": "are you there?", "on_busy": "reject"})
    slow.join()
    assert refused.status_code == 409 and int(refused.headers["Retry-After"]) >= 1
    assert refused.json()["error"]["type"] == "TurnInProgress"
    assert [i.text for i in store.history(cid)][0] == "long one"
    assert "are you there?" not in [i.text for i in store.history(cid)]


@pytest.mark.parametrize(("body", "headers", "status", "kind"), [
    (b"{not json", {}, 422, "InvalidRequest"),
    (b'{"text": 5}', {}, 422, "InvalidRequest"),
    (b'{"text": "caf\xe9"}', {}, 400, "InvalidEncoding"),
    (b'{"text": "' + b"x" * 3_000_000 + b'"}', {}, 413, "RequestTooLarge"),
    (b'{"text": "hi"}', {"content-length": "99999999"}, 413, "RequestTooLarge"),
    (b'{"text": "hi", "on_busy": "later"}', {}, 422, "InvalidRequest"),
])
def test_bad_bodies_get_a_json_error_and_write_nothing(
        client: TestClient, store: Store, body: bytes, headers: dict[str, str], status: int,
        kind: str) -> None:
    cid = _new(client)
    before = store.history(cid)
    response = client.post(f"/v1/conversations/{cid}/messages", content=body,
                           headers={"content-type": "application/json", **headers})
    assert response.status_code == status
    error = response.json()["error"]
    assert error["type"] == kind and "nothing was saved" in error["message"]
    assert store.history(cid) == before


def test_a_users_memory_over_http(client: TestClient, store: Store) -> None:
    from threadline.memory import MemoryStore, NewMemory
    from threadline.stores.relational import RelationalStore

    assert isinstance(store, RelationalStore)
    memory = MemoryStore(store)
    kept = memory.add("ann", NewMemory("Ann lives in Oslo"))
    memory.add("bob", NewMemory("Bob has a cat"))
    assert [e["text"] for e in client.get("/v1/users/ann/memory").json()] == [
        "Ann lives in Oslo"]
    assert client.get(f"/v1/users/bob/memory/{kept.id}").status_code == 404
    assert client.get(f"/v1/users/ann/memory/{kept.id}").json()["trusted"] is True
    assert client.delete(f"/v1/users/ann/memory/{kept.id}").status_code == 204
    assert client.delete("/v1/users/bob/memory").json() == {"user_id": "bob", "deleted": 1}
    assert client.get("/v1/users/bob/memory", params={"all": True}).json() == []


def test_a_message_sent_with_a_user_recalls_their_memory(store: Store) -> None:
    from threadline.items import ItemKind
    from threadline.memory import MemoryStore, NewMemory
    from threadline.memory.recall import MemoryRecall
    from threadline.standard import standard_engine
    from threadline.stores.relational import RelationalStore

    assert isinstance(store, RelationalStore)
    memory = MemoryStore(store)
    memory.add("ann", NewMemory("I am allergic to peanuts"))
    client = TestClient(create_app(standard_engine(store, ScriptedModel(),
                                                   recall=MemoryRecall(memory))))
    cid = _new(client)
    bad = client.post(f"/v1/conversations/{cid}/messages",
                      json={"text": "Any snack without peanuts?", "user_id": " ann"})
    assert bad.status_code == 400 and "invalid user id" in bad.json()["error"]["message"]
    assert list(store.history(cid)) == []  # refused before anything was written
    sent = client.post(f"/v1/conversations/{cid}/messages",
                       json={"text": "Which snack is fine, allergic to peanuts?",
                             "user_id": "ann"})
    assert sent.status_code == 200, sent.text
    recalled = [i for i in store.history(cid) if i.kind is ItemKind.RECALL]
    assert [m["text"] for m in recalled[0].content["memories"]] == ["I am allergic to peanuts"]


def test_a_rate_limited_provider_answers_503_with_its_retry_after(store: Store) -> None:
    from threadline.errors import ProviderOverloaded, ProviderRateLimited

    model = ScriptedModel([ProviderRateLimited("Anthropic's API", "HTTP 429: slow down",
                                               retry_after_s=12.5),
                           ProviderOverloaded("Anthropic's API", "HTTP 529: Overloaded"), "ok"])
    client = TestClient(create_app(Engine(store, model)))
    cid = _new(client)
    body = {"text": "hi", "client_msg_id": "m-1"}  # each retry answers the same message
    limited = client.post(f"/v1/conversations/{cid}/messages", json=body)
    assert limited.status_code == 503 and limited.headers["Retry-After"] == "13"
    assert limited.json()["error"]["type"] == "ProviderRateLimited"
    busy = client.post(f"/v1/conversations/{cid}/messages", json=body)
    assert busy.status_code == 503 and "Retry-After" not in busy.headers
    assert client.post(f"/v1/conversations/{cid}/messages", json=body).json()["reply"] == "ok"
    shown = client.get(f"/v1/conversations/{cid}").json()
    assert [i["kind"] for i in shown["items"]] == ["user_message", "assistant_message"]
