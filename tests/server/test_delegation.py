"""Sub-agents over HTTP, on SQLite and PostgreSQL: a conversation created with delegation
on, its children listed, and what is refused without changing anything."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.turn.test_delegate import RESEARCHER, Searches, delegating, explorer, researcher, routed
from threadline.engine import Engine
from threadline.models.scripted import ScriptedModel
from threadline.server.app import create_app
from threadline.stores.base import Store


@pytest.fixture
def client(store: Store) -> TestClient:
    model = routed(delegating("find the founding year"), explorer(2))
    return TestClient(create_app(Engine(store, model, agents=[researcher(Searches())])))


def test_a_conversation_created_with_delegation_lists_its_children(client: TestClient,
                                                                   store: Store) -> None:
    created = client.post("/v1/conversations",
                          json={"delegation": {"max_depth": 1, "max_fanout": 2}})
    assert created.status_code == 201
    cid = created.json()["id"]
    assert created.json()["metadata"]["delegation"] == {"max_depth": 1, "max_fanout": 2}
    reply = client.post(f"/v1/conversations/{cid}/messages", json={"text": "When?"})
    assert reply.status_code == 200
    [child] = client.get(f"/v1/conversations/{cid}/children").json()
    assert child["status"] == "done" and child["agent"] == "researcher"
    assert child["calls"] == 3 and child["prompt_tokens"] > 0
    shown = client.get(f"/v1/conversations/{child['child']}").json()
    assert shown["conversation"]["system"] == RESEARCHER
    assert shown["conversation"]["metadata"]["parent"]["conversation_id"] == cid
    assert client.get(f"/v1/conversations/{child['child']}/children").json() == []
    # the child is its parent's owner's: it appears in the listing beside it
    assert {c["id"] for c in client.get("/v1/conversations").json()} == {cid, child["child"]}


def test_delegation_is_refused_where_the_service_has_no_agents(store: Store) -> None:
    client = TestClient(create_app(Engine(store, ScriptedModel())))
    refused = client.post("/v1/conversations", json={"delegation": {}})
    assert refused.status_code == 400 and "no sub-agents" in refused.json()["error"]["message"]
    assert store.conversations() == []


@pytest.mark.parametrize("limits", [{"max_depth": 0}, {"max_fanout": 99}, {"max_depth": "x"}])
def test_bad_delegation_limits_are_refused(client: TestClient, store: Store,
                                           limits: dict[str, object]) -> None:
    refused = client.post("/v1/conversations", json={"delegation": limits})
    assert refused.status_code == 422 and "delegation" in refused.text
    assert store.conversations() == []


def test_children_of_an_unknown_conversation_are_not_found(client: TestClient) -> None:
    assert client.get("/v1/conversations/c_nope/children").status_code == 404


def test_deleting_a_parent_deletes_its_children(client: TestClient) -> None:
    cid = client.post("/v1/conversations", json={"delegation": {}}).json()["id"]
    client.post(f"/v1/conversations/{cid}/messages", json={"text": "When?"})
    [child] = client.get(f"/v1/conversations/{cid}/children").json()
    assert client.delete(f"/v1/conversations/{cid}").status_code == 204
    assert client.get(f"/v1/conversations/{child['child']}").status_code == 404
    assert client.get(f"/v1/conversations/{cid}").status_code == 404
