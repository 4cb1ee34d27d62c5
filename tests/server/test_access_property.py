"""A property of access control: whatever several users' tokens ask for, in any order, no
response to a user token carries another user's messages, conversations, calls, streams or
memories; a user is served everything of their own; and what is refused changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.test_access import bearer, new_token, sse
from threadline.engine import Engine
from threadline.items import new_id
from threadline.memory import MemoryStore, NewMemory
from threadline.models.scripted import ScriptedModel
from threadline.server.app import create_app
from threadline.settings import Durability
from threadline.stores.sqlite import SQLiteStore

USERS = ("ann", "bob", "cy")
_user = st.sampled_from(USERS)
_pick = st.integers(0, 9)  # which of the conversations, calls, ... made so far
OPERATION = st.one_of(
    st.tuples(st.just("create"), _user),
    st.tuples(st.just("send"), _user, _pick, st.booleans()),  # streamed or not
    st.tuples(st.just("chat"), _user, st.none() | _pick),  # None: a new conversation
    st.tuples(st.just("list"), _user),
    st.tuples(st.just("read"), _user, _pick,
              st.sampled_from(["show", "calls", "fork", "delete"])),
    st.tuples(st.just("read"), _user, _pick, st.just("delete")),  # more often: 404s follow
    st.tuples(st.just("call"), _user, _pick),
    st.tuples(st.just("events"), _user, _pick),
    st.tuples(st.just("remember"), _user),
    st.tuples(st.just("memory"), _user, _user, _pick,
              st.sampled_from(["list", "get", "delete", "forget"])),
)


@dataclass
class Thing:
    id: str
    owner: str
    conversation: str | None = None  # what it belongs to; gone when that is deleted


@dataclass
class Model:
    """What the test made, and whose it is."""

    conversations: list[Thing] = field(default_factory=list)
    calls: list[Thing] = field(default_factory=list)
    generations: list[Thing] = field(default_factory=list)
    memories: list[Thing] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    markers: dict[str, str] = field(default_factory=dict)  # text or id -> its user
    counter: int = 0

    def gone(self, thing: Thing) -> bool:
        return thing.id in self.deleted or thing.conversation in self.deleted

    def mark(self, owner: str, *found: str) -> None:
        self.markers.update(dict.fromkeys(found, owner))

    def text(self, user: str) -> str:
        self.counter += 1
        self.mark(user, marker := f"{user}-secret-{self.counter:03d}")
        return marker


@dataclass
class Service:
    """One store and app for every example; each example brings users of its own."""

    store: SQLiteStore
    client: TestClient

    @classmethod
    def over(cls, store: SQLiteStore) -> Service:
        return cls(store, TestClient(create_app(Engine(store, ScriptedModel()))))


class Run:
    def __init__(self, service: Service) -> None:
        self.store, self.client, self.model = service.store, service.client, Model()
        # fresh users, so what earlier examples left is no one's here
        self.users = {name: f"{name}-{new_id('')}" for name in USERS}
        self.secrets = {user: new_token(self.store.tokens, user) for user in self.users.values()}
        self.memory = MemoryStore(self.store)

    def request(self, user: str, method: str, url: str, *, asked: str | None = None,
                **kwargs: Any) -> Any:
        """Send as ``user``; check the answer leaks nothing of another user's (beyond the id
        ``asked`` for) and, if refused, that nothing changed."""
        before = self.writes()
        response = self.client.request(method, url, headers=bearer(self.secrets[user]), **kwargs)
        seen = response.text if asked is None else response.text.replace(asked, "")
        leaked = [m for m, owner in self.model.markers.items() if owner != user and m in seen]
        assert leaked == [], f"{user} {method} {url} got another user's {leaked}"
        if response.status_code >= 400:
            assert set(response.json()) == {"error"}
            assert self.writes() == before, f"{user} {method} {url} wrote on a refusal"
        return response

    def writes(self) -> int:
        """Rows written through the store's connection so far (rolled back ones too): the
        cheap, strict form of comparing every table before and after."""
        with self.store._session() as db:
            return int(db.one("SELECT total_changes()")[0])

    def expect(self, user: str, thing: Thing | None) -> set[int]:
        """The statuses the user may get for a thing: refused unless theirs, missing if
        deleted."""
        if thing is None or self.model.gone(thing):
            return {404}
        return {200, 201, 204} if thing.owner == user else {403}

    def do(self, operation: tuple[Any, ...]) -> None:
        kind, *rest = operation
        getattr(self, f"_{kind}")(*(self.users.get(a, a) if isinstance(a, str) else a
                                    for a in rest))

    @staticmethod
    def _nth(things: list[Thing], n: int) -> Thing | None:
        return things[n % len(things)] if things else None

    def _create(self, user: str) -> None:
        made = self.request(user, "POST", "/v1/conversations", json={})
        assert made.status_code == 201 and made.json()["owner"] == user
        self.model.conversations.append(Thing(made.json()["id"], user))
        self.model.mark(user, made.json()["id"])

    def _send(self, user: str, n: int, stream: bool) -> None:
        target = self._nth(self.model.conversations, n)
        if target is None:
            return
        text = self.model.text(user)
        sent = self.request(user, "POST", f"/v1/conversations/{target.id}/messages",
                            asked=target.id, json={"text": text, "stream": stream})
        assert sent.status_code in self.expect(user, target), sent.text
        if sent.status_code != 200:
            return
        if stream:
            events = sse(sent.text)
            generation, done = events[0][1]["generation_id"], events[-1][1]
            self.model.generations.append(Thing(generation, user, target.id))
            self.model.mark(user, generation)
        else:
            done = sent.json()
        self.model.calls.append(Thing(done["call_id"], user, target.id))
        self.model.mark(user, done["call_id"])

    def _chat(self, user: str, n: int | None) -> None:
        target = None if n is None else self._nth(self.model.conversations, n)
        text = self.model.text(user)
        metadata = {} if target is None else {"metadata": {"conversation_id": target.id}}
        sent = self.request(user, "POST", "/v1/chat/completions",
                            asked=None if target is None else target.id,
                            json={"model": "scripted", **metadata,
                                  "messages": [{"role": "user", "content": text}]})
        assert sent.status_code in ({200} if target is None else self.expect(user, target))
        if sent.status_code == 200:
            cid = sent.headers["X-Threadline-Conversation"]
            if target is None:
                self.model.conversations.append(Thing(cid, user))
            self.model.calls.append(Thing(sent.json()["threadline"]["call_id"], user, cid))
            self.model.mark(user, cid, sent.json()["threadline"]["call_id"])

    def _list(self, user: str) -> None:
        listed = self.request(user, "GET", "/v1/conversations")
        assert {c["id"] for c in listed.json()} == {
            c.id for c in self.model.conversations if c.owner == user and not self.model.gone(c)}

    def _read(self, user: str, n: int, what: str) -> None:
        target = self._nth(self.model.conversations, n)
        if target is None:
            return
        url = f"/v1/conversations/{target.id}"
        method, path, body = {"show": ("GET", "", None), "calls": ("GET", "/calls", None),
                              "fork": ("POST", "/fork", {"from_seq": None}),
                              "delete": ("DELETE", "", None)}[what]
        answer = self.request(user, method, url + path, asked=target.id, json=body)
        assert answer.status_code in self.expect(user, target), answer.text
        if answer.status_code < 300 and what == "delete":
            self.model.deleted.add(target.id)

    def _call(self, user: str, n: int) -> None:
        target = self._nth(self.model.calls, n)
        if target is not None:
            answer = self.request(user, "GET", f"/v1/calls/{target.id}", asked=target.id,
                                  params={"request": True})
            assert answer.status_code in self.expect(user, target), answer.text

    def _events(self, user: str, n: int) -> None:
        target = self._nth(self.model.generations, n)
        if target is not None:
            answer = self.request(user, "GET", f"/v1/generations/{target.id}/events",
                                  asked=target.id)
            assert answer.status_code in self.expect(user, target), answer.text

    def _remember(self, user: str) -> None:
        entry = self.memory.add(user, NewMemory(self.model.text(user)))
        self.model.memories.append(Thing(entry.id, user))
        self.model.mark(user, entry.id)

    def _memory(self, user: str, whose: str, n: int, what: str) -> None:
        target = self._nth([m for m in self.model.memories if m.owner == whose], n)
        base = f"/v1/users/{whose}/memory"
        if what in ("list", "forget"):
            method = "GET" if what == "list" else "DELETE"
            answer = self.request(user, method, base, params={"all": True})
            assert answer.status_code == (200 if user == whose else 403), answer.text
            if answer.status_code == 200 and what == "forget":
                self.model.deleted |= {m.id for m in self.model.memories if m.owner == whose}
            return
        if target is None:
            return
        method = "GET" if what == "get" else "DELETE"
        answer = self.request(user, method, f"{base}/{target.id}", asked=target.id)
        assert answer.status_code in (self.expect(user, target) if user == whose else {403})
        if answer.status_code == 204:
            self.model.deleted.add(target.id)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    # durability is not what is tested here: no fsync per commit
    store = SQLiteStore(tmp_path / "threadline.db", durability=Durability.OFF)
    yield Service.over(store)
    store.close()


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(operations=st.lists(OPERATION, min_size=1, max_size=25))
def test_no_user_token_ever_reads_another_users_items(
        service: Service, operations: list[tuple[Any, ...]]) -> None:
    run = Run(service)
    for user in USERS:  # everyone has something for the others to reach for
        run.do(("create", user))
        run.do(("send", user, len(run.model.conversations) - 1, True))
        run.do(("remember", user))
    for operation in operations:
        run.do(operation)


def test_the_property_sees_a_leak(service: Service) -> None:
    """The check above fails on a response that carries another user's marker."""
    run = Run(service)
    run.do(("create", "ann"))
    run.model.mark(run.users["bob"], run.model.conversations[0].id)  # pretend it were bob's
    with pytest.raises(AssertionError, match="got another user's"):
        run.do(("list", "ann"))
