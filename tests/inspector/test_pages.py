"""The inspector's server side without a browser (FastAPI's TestClient over the fixture store):
who may see what, the cookie reaching only /ui, refusals of bad input, the page walk, and the
prompt split each bar draws."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import BaseRoute

from tests.inspector.conftest import World
from tests.replay.log import engine_for
from threadline.calls import CallStatus, ModelCall, Timings, Usage
from threadline.inspector.app import mount
from threadline.inspector.timeline import split
from threadline.items import NewItem, utc_now
from threadline.models.scripted import ScriptedModel
from threadline.server.app import create_app
from threadline.stores.base import Commit, Generation, NewConversation
from threadline.stores.relational import RelationalStore
from threadline.stores.sqlite import SQLiteStore

HTML = {"accept": "text/html"}


@pytest.fixture
def opened(world: World) -> Iterator[SQLiteStore]:
    store = world.open()
    yield store
    store.close()


def app_for(store: SQLiteStore, *, require_tokens: bool = False) -> FastAPI:
    engine = engine_for(store, ScriptedModel())
    app = create_app(engine, require_tokens=require_tokens)
    mount(app, engine)
    return app


def client_for(store: SQLiteStore, *, require_tokens: bool = False) -> TestClient:
    return TestClient(app_for(store, require_tokens=require_tokens),
                      base_url="http://127.0.0.1:8080")


def signed(client: TestClient, secret: str | None) -> TestClient:
    """The client, carrying ``secret`` as the login cookie from now on (None: no cookie)."""
    client.cookies.clear()
    if secret is not None:
        client.cookies.set("threadline_token", secret)
    return client


def every_route(routes: Sequence[BaseRoute]) -> Iterator[BaseRoute]:
    """The app's routes, those of included routers too (FastAPI keeps them apart)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        yield from every_route(included.routes) if included is not None else (route,)


def listed(html: str) -> list[str]:
    return re.findall(r'data-conversation="([^"]+)"', html)


def rows(store: SQLiteStore) -> list[str]:
    assert isinstance(store, RelationalStore)
    with store._session() as db:
        return sorted(repr(r) for t in ("conversations", "items", "model_calls", "api_tokens")
                      for r in db.all(f"SELECT * FROM {t}"))


def test_an_open_loopback_service_needs_no_login(opened: SQLiteStore) -> None:
    page = client_for(opened).get("/ui", headers=HTML)
    assert page.status_code == 200 and listed(page.text) == ["c_ops", "c_bob", "c_ann"]
    assert "Sign out" not in page.text
    assert "no sign-in is needed" in client_for(opened).get("/ui/login").text


def test_every_inspector_page_is_refused_without_a_token(world: World) -> None:
    world.tokens()
    store = world.open()
    try:
        app = app_for(store, require_tokens=True)
        client = TestClient(app)
        before = rows(store)
        routes = [r for r in every_route(app.routes) if isinstance(r, APIRoute)
                  and r.path.startswith("/ui") and r.path != "/ui/login"]
        assert {r.path for r in routes} >= {"/ui", "/ui/c/{conversation_id}", "/ui/logout",
                                            "/ui/generations/{generation_id}/events"}
        for route in routes:
            path = re.sub(r"\{[^}]+\}", "c_ann", route.path)
            for method in route.methods:
                navigated = client.request(method, path, headers=HTML, follow_redirects=False)
                if method == "GET":
                    assert navigated.status_code == 303, path
                    assert navigated.headers["location"].startswith("/ui/login?next=")
                else:
                    assert navigated.status_code == 401, path
                fetched = client.request(method, path, follow_redirects=False)
                assert fetched.status_code == 401, path
                assert "Lisbon" not in navigated.text + fetched.text
        assert client.get("/ui/static/inspector.css").status_code == 200  # no data in it
        assert rows(store) == before
    finally:
        store.close()


def test_the_cookie_reaches_the_pages_and_never_the_api(world: World) -> None:
    secrets = world.tokens()
    store = world.open()
    try:
        client = client_for(store)
        answer = client.post("/ui/login", data={"token": secrets["ann"], "next": "/ui/c/c_ann"},
                             headers={"origin": "http://127.0.0.1:8080"},
                             follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/c/c_ann"
        cookie = answer.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
        assert "Secure" not in cookie  # plain http on loopback
        signed(client, secrets["ann"])
        assert listed(client.get("/ui").text) == ["c_ann"]
        assert client.get("/ui/c/c_bob", headers=HTML).status_code == 403
        assert client.get("/ui/c/c_ops", headers=HTML).status_code == 403
        assert client.get("/ui?user=bob", headers=HTML).status_code == 403
        # the same secret as a cookie opens no API route
        assert client.get("/v1/conversations").status_code == 401
        assert client.post("/v1/conversations", json={}).status_code == 401
        signed(client, secrets["admin"])
        assert listed(client.get("/ui").text) == ["c_ops", "c_bob", "c_ann"]
        gone = client.post("/ui/logout", follow_redirects=False,
                           headers={"origin": "http://127.0.0.1:8080"})
        assert gone.status_code == 303 and 'threadline_token=""' in gone.headers["set-cookie"]
    finally:
        store.close()


@pytest.mark.parametrize("secret", ["", "tl_unknown", "revoked"])
def test_a_bad_token_signs_nobody_in(world: World, secret: str) -> None:
    secrets = world.tokens()
    store = world.open()
    try:
        if secret == "revoked":
            token = next(t for t in store.tokens.tokens() if t.name == "bob")
            store.tokens.revoke(token.id, utc_now())
            secret = secrets["bob"]
        answer = client_for(store).post("/ui/login", data={"token": secret},
                                        headers={"origin": "http://127.0.0.1:8080"})
        assert answer.status_code == 401 and "set-cookie" not in answer.headers
        assert "Not signed in" in answer.text
    finally:
        store.close()


@pytest.mark.parametrize("headers", [{"origin": "https://evil.example"}, {},
                                     {"sec-fetch-site": "cross-site"}])
def test_a_post_from_elsewhere_is_refused(opened: SQLiteStore, headers: dict[str, str]) -> None:
    answer = client_for(opened).post("/ui/login", data={"token": "x"}, headers=headers)
    assert answer.status_code == 403 and "set-cookie" not in answer.headers


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/ui",
                                    "/v1/conversations", "/ui/login?next=/ui"])
def test_signing_in_goes_back_only_to_an_inspector_page(world: World, target: str) -> None:
    secrets = world.tokens()
    store = world.open()
    try:
        answer = client_for(store).post(
            "/ui/login", data={"token": secrets["admin"], "next": target},
            headers={"origin": "http://127.0.0.1:8080"}, follow_redirects=False)
        assert answer.headers["location"] == "/ui"
    finally:
        store.close()


@pytest.mark.parametrize(("path", "status", "says"), [
    ("/ui?limit=abc", 400, "limit must be a whole number"),
    ("/ui?limit=0", 400, "limit must be from 1 to 100"),
    ("/ui?sort=alphabetical", 400, "unknown sort"),
    ("/ui?q=" + "x" * 201, 400, "at most 200 are searched"),
    ("/ui/c/c_ann?turns=1000", 400, "turns must be from 1 to 100"),
    ("/ui/c/c_ann?before=3&after=1", 400, "either before= or after="),
    ("/ui/c/c_ann?before=-1", 400, "before must be from 0"),
    ("/ui/c/c_ann?branch=nope", 404, "has no branch"),
    ("/ui/c/c_nope", 404, "c_nope"),
    ("/ui/generations/gen_nope/events", 404, "no generation gen_nope"),
])
def test_bad_input_is_refused_with_what_to_do(opened: SQLiteStore, path: str, status: int,
                                              says: str) -> None:
    client = client_for(opened)
    before = rows(opened)
    page = client.get(path, headers=HTML)
    assert page.status_code == status and says in page.text
    assert page.headers["content-type"].startswith("text/html")
    fetched = client.get(path)  # not a page navigation: the API's JSON error
    assert fetched.status_code == status and says in fetched.json()["error"]["message"]
    assert rows(opened) == before


def test_a_running_reply_streams_on_a_path_the_cookie_reaches(world: World) -> None:
    secrets = world.tokens()
    store = world.open()
    try:
        store.save_generation(Generation("gen_ann", "c_ann", "Hello, wor"), utc_now())
        store.save_generation(Generation("gen_ann", "c_ann", "Hello, world", True,
                                         {"event": "done", "data": {"ok": True}}), utc_now())
        client = client_for(store)
        events = signed(client, secrets["ann"]).get("/ui/generations/gen_ann/events?offset=7")
        assert 'data: {"text": "world"}' in events.text and "event: done" in events.text
        refused = signed(client, secrets["bob"]).get("/ui/generations/gen_ann/events")
        assert refused.status_code == 403
    finally:
        store.close()


def test_the_timeline_walk_is_whole_turns_in_both_directions(opened: SQLiteStore) -> None:
    now = utc_now()
    items = [x for n in range(1, 46) for x in
             (NewItem.user(f"question {n}"), NewItem.assistant(f"answer {n}"),
              *([NewItem.note(f"note {n}")] if n % 7 == 0 else []))]
    opened.commit(Commit(conversation_id="c_long", created_at=now, expected_head=None,
                         create=NewConversation("c_long"), items=items))
    client = client_for(opened)

    def turns(query: str) -> tuple[list[int], dict[str, str]]:
        html = client.get(f"/ui/c/c_long?turns=20{query}").text
        links = dict(re.findall(r'rel="(prev|next)" href="[^"]*?(?:before|after)=(\d+)', html))
        return [int(t) for t in re.findall(r'data-turn="(\d+)"', html)], links
    newest, links = turns("")
    assert newest == list(range(26, 46)) and "next" not in links
    middle, links = turns(f"&before={links['prev']}")
    assert middle == list(range(6, 26))
    oldest, links = turns(f"&before={links['prev']}")
    assert oldest == list(range(1, 6)) and "prev" not in links
    first, links = turns("&after=0")
    assert first == list(range(1, 21)) and "prev" not in links
    assert turns(f"&after={links['next']}")[0] == list(range(21, 41))


def _call(prompt: int, cached: int, prefix: dict[str, object] | None) -> ModelCall:
    return ModelCall("call_x", "c", "main", 1, 1, None, CallStatus.OK, "m", None, {},
                     Usage(prompt, cached, 1), Timings(5.0, 9.0), datetime.now(UTC),
                     prefix=prefix)


def test_the_bar_splits_the_prompt_into_reused_uncached_and_new() -> None:
    report = {"previous_call_id": "p", "prompt_bytes": 4000, "reused_bytes": 3000,
              "previous_bytes": 3000, "prompt_tokens": 1000, "reused_tokens": 700,
              "previous_tokens": 800, "reused_blocks": 43, "prompt_blocks": 62,
              "cause": "tail_replaced", "detail": "", "divergence": None, "layout": []}
    assert split(_call(1000, 600, report)) == (1000, 600, 200, 200)
    assert split(_call(1000, 0, None)) == (1000, 0, 0, 1000)  # a first call: all new
    # no token ids recorded: the previous request's bytes, scaled to this prompt's tokens
    assert split(_call(1000, 0, {**report, "previous_tokens": None})) == (1000, 0, 750, 250)
    # a provider that cached more than the previous request had (a shared system prompt)
    assert split(_call(1000, 900, report)) == (1000, 900, 0, 100)
