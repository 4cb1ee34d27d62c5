"""The conversation page names a sub-agent's parent and lists a parent's children."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tests.inspector._dom import parse
from tests.inspector._views_app import views_app
from tests.turn.test_delegate import Searches, delegating, explorer, researcher, routed
from threadline.engine import Engine
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.delegate import Delegation


def test_the_page_links_parent_and_children(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "threadline.db")
    model = routed(delegating("first", "second"), explorer(1))
    engine = Engine(store, model, agents=[researcher(Searches())], delegation=Delegation())
    cid = engine.run_turn("two tasks").conversation_id
    ui = TestClient(views_app(engine))
    page = parse(ui.get(f"/ui/c/{cid}").text)
    children = page.find("section", class_="delegation").find_all("li")
    assert [li.attrs["data-status"] for li in children] == ["done", "done"]
    first = children[0].attrs["data-child"]
    results = [i for i in store.history(cid) if i.kind is ItemKind.TOOL_RESULT]
    assert first == results[0].content["details"]["child"]
    assert "2 calls" in children[0].text
    child_page = ui.get(f"/ui/c/{first}")
    assert child_page.status_code == 200
    parent = parse(child_page.text).find("section", class_="delegation").find_all(
        "p", class_="parent")
    assert len(parent) == 1 and cid in parent[0].text and "researcher" in parent[0].text
    plain = Engine(store, ScriptedModel()).run_turn("no delegation here")
    assert not parse(ui.get(f"/ui/c/{plain.conversation_id}").text).find_all(
        "section", class_="delegation")
    store.close()
