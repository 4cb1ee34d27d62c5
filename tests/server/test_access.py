"""Access control over HTTP, route by route: without a token, with a revoked one and with
another user's, every route is refused in the JSON error shape and writes nothing; its owner
and an admin are served. The table below names every route the app has, so a route added
without an access decision fails here."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from threadline.engine import Engine
from threadline.items import utc_now
from threadline.memory import MemoryStore, NewMemory
from threadline.models.scripted import ScriptedModel
from threadline.server.access import PUBLIC_PATHS, current_caller
from threadline.server.app import create_app
from threadline.stores.base import Store
from threadline.stores.relational import RelationalStore
from threadline.stores.tokens import TokenBackend, TokenRole, issue

# every table a request could write to
_TABLES = ("conversations", "branches", "items", "model_calls", "generations", "leases",
           "memory_entries", "memory_jobs", "api_tokens")
ANN_TEXT, ANN_MEMORY, BOB_TEXT = "ann's plan is blue", "Ann's door code is 4711", "bob's plan"


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def snapshot(store: Store) -> list[str]:
    """Every row of every table, to compare before and after a refused request."""
    assert isinstance(store, RelationalStore)
    with store._session() as db:
        return sorted(f"{table}:{row!r}" for table in _TABLES
                      for row in db.all(f"SELECT * FROM {table}"))


def new_token(tokens: TokenBackend, user_id: str | None) -> str:
    role = TokenRole.ADMIN if user_id is None else TokenRole.USER
    return issue(tokens, role=role, user_id=user_id, name=None, at=utc_now())[1]


def sse(body: str) -> list[tuple[str, Any]]:
    return [(block.split("\n")[0].removeprefix("event: "),
             json.loads(block.rsplit("data: ", 1)[1])) for block in body.strip().split("\n\n")]


@dataclass
class World:
    """Ann's conversation (a turn, a streamed turn, a call), her memory, and Bob's."""

    store: Store
    client: TestClient
    admin: str
    ann: str
    bob: str
    revoked: str  # one of Ann's, revoked
    ann_cid: str
    ann_call: str
    ann_generation: str
    ann_memory: str
    bob_cid: str
    ann_response: str
    ann_response_cid: str  # the conversation Ann's response started

    def ann_markers(self) -> list[str]:
        return [ANN_TEXT, ANN_MEMORY, self.ann_cid, self.ann_call, self.ann_generation,
                self.ann_memory, self.ann_response]


def _conversation(client: TestClient, secret: str, text: str) -> tuple[str, str]:
    cid = client.post("/v1/conversations", json={}, headers=bearer(secret)).json()["id"]
    turn = client.post(f"/v1/conversations/{cid}/messages", json={"text": text},
                       headers=bearer(secret))
    assert turn.status_code == 200, turn.text
    return cid, turn.json()["call_id"]


@pytest.fixture
def world(store: Store) -> World:
    tokens = store.tokens
    assert tokens is not None
    admin, ann, bob = (new_token(tokens, u) for u in (None, "ann", "bob"))
    old, revoked = issue(tokens, role=TokenRole.USER, user_id="ann", name=None, at=utc_now())
    tokens.revoke(old.id, utc_now())
    client = TestClient(create_app(Engine(store, ScriptedModel())))
    ann_cid, ann_call = _conversation(client, ann, ANN_TEXT)
    streamed = client.post(f"/v1/conversations/{ann_cid}/messages", headers=bearer(ann),
                           json={"text": ANN_TEXT + " again", "stream": True})
    generation = sse(streamed.text)[0][1]["generation_id"]
    memory = MemoryStore(store).add("ann", NewMemory(ANN_MEMORY)).id
    MemoryStore(store).add("bob", NewMemory("Bob has a cat"))
    bob_cid, _ = _conversation(client, bob, BOB_TEXT)
    response = client.post("/v1/responses", headers=bearer(ann),
                           json={"model": "scripted", "input": ANN_TEXT + " in a response"})
    assert response.status_code == 200, response.text
    return World(store, client, admin, ann, bob, revoked, ann_cid, ann_call, generation, memory,
                 bob_cid, response.json()["id"], response.headers["X-Threadline-Conversation"])


Request = dict[str, Any]  # TestClient.request's keyword arguments: method, url, json
_CHAT = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}

# (method, path) -> the request that reaches Ann's things, and what Bob's token gets for it
ROUTES: dict[tuple[str, str], tuple[Callable[[World], Request], int]] = {
    ("POST", "/v1/conversations"): (
        lambda w: {"json": {"owner": "ann"}}, 403),
    ("GET", "/v1/conversations"): (
        lambda w: {}, 200),  # Bob's list: his own only (checked below)
    ("GET", "/v1/conversations/{conversation_id}"): (
        lambda w: {"url": f"/v1/conversations/{w.ann_cid}"}, 403),
    ("DELETE", "/v1/conversations/{conversation_id}"): (
        lambda w: {"url": f"/v1/conversations/{w.ann_cid}"}, 403),
    ("POST", "/v1/conversations/{conversation_id}/messages"): (
        lambda w: {"url": f"/v1/conversations/{w.ann_cid}/messages",
                   "json": {"text": "mine now"}}, 403),
    ("POST", "/v1/conversations/{conversation_id}/fork"): (
        lambda w: {"url": f"/v1/conversations/{w.ann_cid}/fork",
                   "json": {"from_seq": 1, "name": "alt"}}, 403),
    ("GET", "/v1/conversations/{conversation_id}/calls"): (
        lambda w: {"url": f"/v1/conversations/{w.ann_cid}/calls"}, 403),
    ("GET", "/v1/conversations/{conversation_id}/children"): (
        lambda w: {"url": f"/v1/conversations/{w.ann_cid}/children"}, 403),
    ("GET", "/v1/calls/{call_id}"): (
        lambda w: {"url": f"/v1/calls/{w.ann_call}", "params": {"request": True}}, 403),
    ("GET", "/v1/generations/{generation_id}/events"): (
        lambda w: {"url": f"/v1/generations/{w.ann_generation}/events"}, 403),
    ("POST", "/v1/responses"): (
        lambda w: {"json": {"model": "scripted", "input": "mine now",
                            "previous_response_id": w.ann_response}}, 403),
    ("GET", "/v1/responses/{response_id}"): (
        lambda w: {"url": f"/v1/responses/{w.ann_response}"}, 403),
    ("DELETE", "/v1/responses/{response_id}"): (
        lambda w: {"url": f"/v1/responses/{w.ann_response}"}, 403),
    ("POST", "/v1/chat/completions"): (
        lambda w: {"json": {**_CHAT, "metadata": {"conversation_id": w.ann_cid}}}, 403),
    ("GET", "/v1/users/{user_id}/memory"): (
        lambda w: {"url": "/v1/users/ann/memory", "params": {"all": True}}, 403),
    ("GET", "/v1/users/{user_id}/memory/{entry_id}"): (
        lambda w: {"url": f"/v1/users/ann/memory/{w.ann_memory}"}, 403),
    ("DELETE", "/v1/users/{user_id}/memory/{entry_id}"): (
        lambda w: {"url": f"/v1/users/ann/memory/{w.ann_memory}"}, 403),
    ("DELETE", "/v1/users/{user_id}/memory"): (
        lambda w: {"url": "/v1/users/ann/memory"}, 403),
    ("GET", "/v1/review"): (
        lambda w: {"params": {"resolved": True}}, 403),
}
# every user's at once: an admin's only, so the owner is refused too
ADMIN_ONLY = {("GET", "/v1/review")}


def _request(world: World, route: tuple[str, str]) -> Request:
    method, path = route
    return {"method": method, "url": path, **ROUTES[route][0](world)}


def _send(world: World, route: tuple[str, str], secret: str | None) -> Any:
    headers = {} if secret is None else bearer(secret)
    return world.client.request(**_request(world, route), headers=headers)


def test_every_route_has_an_access_decision(world: World) -> None:
    found, guarded = set(), set()
    for route in world.client.app.routes:  # type: ignore[attr-defined]
        for method in sorted(getattr(route, "methods", set()) - {"HEAD"}):
            found.add((method, route.path))
        if isinstance(route, APIRoute):
            calls = {d.call for d in _dependencies(route.dependant)}
            if current_caller in calls:
                guarded.add(route.path)
    public = {("GET", path) for path in PUBLIC_PATHS}
    assert found - public == set(ROUTES), "give the new route an entry in ROUTES"
    assert found & public == public
    # every route but the public ones asks who the caller is, to check what it names
    assert guarded == {path for _, path in ROUTES}


def _dependencies(dependant: Any) -> list[Any]:
    return [d for sub in dependant.dependencies for d in [sub, *_dependencies(sub)]]


@pytest.mark.parametrize("route", sorted(ROUTES), ids=" ".join)
def test_every_route_refuses_no_token_a_revoked_one_and_another_users(
        world: World, route: tuple[str, str]) -> None:
    before = snapshot(world.store)
    for secret, kind, message in [(None, "Unauthorized", "has none"),
                                  ("tl_not-a-token", "Unauthorized", "not one this service"),
                                  (world.revoked, "Unauthorized", "was revoked")]:
        refused = _send(world, route, secret)
        assert refused.status_code == 401, (secret, refused.text)
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        error = refused.json()["error"]
        assert (error["type"], set(error)) == (kind, {"type", "message", "hint"})
        assert message in error["message"] and "tokens create" in error["hint"]
        assert snapshot(world.store) == before
    other = _send(world, route, world.bob)
    assert other.status_code == ROUTES[route][1], other.text
    if other.status_code == 403:
        assert other.json()["error"]["type"] == "Forbidden"
    else:  # the list: Bob's own
        assert [c["id"] for c in other.json()] == [world.bob_cid]
    # nothing of Ann's comes back, but the id Bob sent
    asked = [marker for marker in world.ann_markers() if marker in repr(_request(world, route))]
    seen = other.text
    for marker in asked:
        seen = seen.replace(marker, "")
    assert [marker for marker in world.ann_markers() if marker in seen] == []
    assert snapshot(world.store) == before


@pytest.mark.parametrize("who", ["ann", "admin"])
@pytest.mark.parametrize("route", sorted(ROUTES), ids=" ".join)
def test_every_route_serves_the_owner_and_an_admin(world: World, route: tuple[str, str],
                                                   who: str) -> None:
    served = _send(world, route, getattr(world, who))
    if route in ADMIN_ONLY and who != "admin":
        assert served.status_code == 403 and "admin token" in served.json()["error"]["hint"]
        return
    assert 200 <= served.status_code < 300, served.text
    if route == ("GET", "/v1/conversations"):
        listed = {c["id"] for c in served.json()}
        anns = {world.ann_cid, world.ann_response_cid}
        assert listed == (anns if who == "ann" else {*anns, world.bob_cid})
    if route == ("POST", "/v1/conversations"):
        assert served.json()["owner"] == "ann"


def test_a_user_token_owns_what_it_creates_and_names_only_itself(world: World) -> None:
    client, store = world.client, world.store
    made = client.post("/v1/conversations", json={}, headers=bearer(world.bob)).json()
    assert made["owner"] == "bob"
    chat = client.post("/v1/chat/completions", json=_CHAT, headers=bearer(world.bob))
    assert store.conversation(chat.headers["X-Threadline-Conversation"]).owner == "bob"
    unowned = client.post("/v1/conversations", json={}, headers=bearer(world.admin)).json()
    assert unowned["owner"] is None  # no one's: admin only
    for secret in (world.ann, world.bob):
        assert client.get(f"/v1/conversations/{unowned['id']}",
                          headers=bearer(secret)).status_code == 403
    before = snapshot(store)
    claimed = client.post(f"/v1/conversations/{world.bob_cid}/messages",
                          headers=bearer(world.bob), json={"text": "hi", "user_id": "ann"})
    assert claimed.status_code == 403 and "'bob''s" in claimed.json()["error"]["message"]
    assert snapshot(store) == before
    missing = client.get("/v1/conversations/c_missing", headers=bearer(world.bob))
    assert missing.status_code == 404  # a missing one is missing for everyone


def test_a_client_message_id_of_another_user_is_refused_without_naming_it(
        world: World) -> None:
    client = world.client
    client.post(f"/v1/conversations/{world.ann_cid}/messages", headers=bearer(world.ann),
                json={"text": "once", "client_msg_id": "msg-1"})
    before = snapshot(world.store)
    for request in [{"url": f"/v1/conversations/{world.bob_cid}/messages",
                     "json": {"text": "once", "client_msg_id": "msg-1"}},
                    {"url": "/v1/chat/completions", "json": {
                        **_CHAT, "metadata": {"conversation_id": world.bob_cid}},
                     "headers": {"Idempotency-Key": "msg-1"}}]:
        headers = {**request.pop("headers", {}), **bearer(world.bob)}
        reused = client.post(**request, headers=headers)
        assert reused.status_code == 400, reused.text
        assert reused.json()["error"]["type"] == "ClientMessageConflict"
        assert world.ann_cid not in reused.text and "once" not in reused.text
    assert snapshot(world.store) == before
    admin = client.post(f"/v1/conversations/{world.bob_cid}/messages",
                        headers=bearer(world.admin), json={"text": "x", "client_msg_id": "msg-1"})
    assert world.ann_cid in admin.text  # an admin may be told where it is


def test_the_public_paths_need_no_token_and_the_spec_names_the_scheme(world: World) -> None:
    for path in sorted(PUBLIC_PATHS - {"/docs/oauth2-redirect"}):
        assert world.client.get(path).status_code == 200, path
    spec = world.client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert spec["paths"]["/v1/conversations"]["get"]["security"] == [{"HTTPBearer": []}]
    assert "security" not in spec["paths"]["/healthz"]["get"]


def test_an_open_service_locks_once_a_token_exists_and_reopens_only_on_loopback(
        store: Store) -> None:
    tokens = store.tokens
    assert tokens is not None
    client = TestClient(create_app(Engine(store, ScriptedModel())))
    # no tokens: open, as before; an OpenAI client's placeholder key is ignored
    assert client.post("/v1/conversations", json={},
                       headers=bearer("sk-placeholder")).status_code == 201
    secret = new_token(tokens, "ann")
    assert client.get("/v1/conversations").status_code == 401  # at once, no restart
    assert client.get("/v1/conversations", headers=bearer(secret)).json() == []
    tokens.revoke(tokens.tokens()[0].id, utc_now())
    assert client.get("/v1/conversations", headers=bearer(secret)).status_code == 200  # open
    required = TestClient(create_app(Engine(store, ScriptedModel()), require_tokens=True))
    refused = required.get("/v1/conversations", headers=bearer(secret))
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]["message"]
    assert required.get("/v1/conversations").status_code == 401  # locked, not open
    assert required.get("/healthz").status_code == 200


def test_a_refused_request_is_not_read(world: World) -> None:
    """The guard answers before the body: no 413, 422 or 400 for what it never reads."""
    cid = world.ann_cid
    for body in (b"{not json", b'{"text": "caf\xe9"}', b"x" * 3_000_000):
        refused = world.client.post(f"/v1/conversations/{cid}/messages", content=body,
                                    headers={"content-type": "application/json"})
        assert refused.status_code == 401


def test_a_resent_history_is_matched_only_among_the_callers_conversations(
        world: World) -> None:
    """Bob resends, word for word, the transcript of Ann's conversation: it must not land in
    hers (nor tell him it exists). It is imported as a new conversation of his."""
    ann_history = [{"role": "user" if i.kind == "user_message" else "assistant",
                    "content": i.text} for i in world.store.history(world.ann_cid)
                   if i.kind in ("user_message", "assistant_message")]
    body = {"model": "scripted", "messages": [*ann_history,
                                               {"role": "user", "content": "and now?"}]}
    before = [i.text for i in world.store.history(world.ann_cid)]
    bobs = world.client.post("/v1/chat/completions", json=body, headers=bearer(world.bob))
    assert bobs.status_code == 200, bobs.text
    got = bobs.json()["threadline"]
    assert got["conversation_id"] != world.ann_cid and got["history"]["how"] == "imported"
    assert world.store.conversation(got["conversation_id"]).owner == "bob"
    assert [i.text for i in world.store.history(world.ann_cid)] == before
    anns = world.client.post("/v1/chat/completions", json=body, headers=bearer(world.ann))
    assert anns.json()["threadline"]["conversation_id"] == world.ann_cid  # hers continues


def test_the_guard_looks_up_tokens_in_place_only_where_reads_wait_on_nothing(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's reads never wait behind a commit, so the guard reads there without a thread
    hop; PostgreSQL's go over the network, so they stay off the event loop."""
    import threadline.server.access as access_module

    hops: list[object] = []

    async def counting(func: Callable[..., Any], *args: Any) -> Any:
        hops.append(func)
        return func(*args)

    monkeypatch.setattr(access_module, "run_in_threadpool", counting)
    secret = new_token(store.tokens, None)
    with TestClient(create_app(Engine(store, ScriptedModel()))) as client:
        assert client.get("/v1/conversations", headers=bearer(secret)).status_code == 200
        assert client.get("/v1/conversations").status_code == 401
    from threadline.stores.sqlite import SQLiteStore

    in_place = isinstance(store, SQLiteStore)
    assert store.tokens.in_place == in_place
    assert len(hops) == (0 if in_place else 2)
