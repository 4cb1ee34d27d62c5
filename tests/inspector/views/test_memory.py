"""The memory page: a user's entries with provenance, trust, validity and revisions; and the
edit, delete and forget-user it offers, each behind its confirmation, each changing the store
exactly as the CLI's command does (the same database, copied, changed both ways and compared
table by table), refused from another site, and only for the caller's own user."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from tests.inspector._dom import Element, parse
from tests.inspector._views_app import (
    SAME_ORIGIN,
    T0,
    World,
    build_world,
    client,
    table_rows,
    tokens,
    views_app,
)
from threadline.cli import cli
from threadline.items import ItemKind
from threadline.memory import MemoryStore
from threadline.models.scripted import ScriptedModel
from threadline.standard import standard_engine
from threadline.stores.memory import MemoryKind
from threadline.stores.sqlite import SQLiteStore

_NEW_ID = re.compile(r"mem_\w+")
_NEW_TIME = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+(Z|[+-]\d\d:\d\d)?")


def dom(response: Any) -> Element:
    assert response.status_code == 200, response.text
    return parse(response.text)


@dataclass
class Twins:
    """One log in two identical files: one changed through the inspector, one by the CLI."""

    world: World
    ui: TestClient
    ui_db: Path
    cli_db: Path

    def cli(self, *args: str) -> None:
        done = CliRunner().invoke(cli, list(args), catch_exceptions=False,
                                  env={"THREADLINE_HOME": str(self.cli_db.parent)})
        assert done.exit_code == 0, done.output

    def compare(self, before: dict[str, list[tuple[Any, ...]]]) -> None:
        """Every table the same in both files, but for the ids and times each change made."""
        ui, by_cli = (_normalised(table_rows(db), before) for db in (self.ui_db, self.cli_db))
        assert ui == by_cli


def _normalised(rows: dict[str, list[tuple[Any, ...]]],
                before: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[str]]:
    """The rows with the ids and times that were not in ``before`` replaced by placeholders."""
    seen = {v for table in before.values() for row in table for v in row}

    def value(v: Any) -> Any:
        if isinstance(v, str) and v not in seen:
            if _NEW_ID.fullmatch(v):
                return "<new id>"
            if _NEW_TIME.fullmatch(v):
                return "<new time>"
        return v
    return {name: sorted(repr(tuple(value(v) for v in row)) for row in table)
            for name, table in rows.items()}


@pytest.fixture
def twins(tmp_path: Path) -> Iterator[Twins]:
    ui_db, cli_db = tmp_path / "ui" / "threadline.db", tmp_path / "cli" / "threadline.db"
    ui_db.parent.mkdir()
    cli_db.parent.mkdir()
    store = SQLiteStore(ui_db)
    world = build_world(store)
    store.close()  # the last connection: the WAL is checkpointed into the file
    shutil.copy2(ui_db, cli_db)
    store = SQLiteStore(ui_db)
    world.store, world.engine = store, standard_engine(store, ScriptedModel())
    try:
        yield Twins(world, TestClient(views_app(world.engine)), ui_db, cli_db)
    finally:
        store.close()


def submit(ui: TestClient, page: Element, **fields: str) -> Any:
    """Send the page's form as a browser would, from the page's own origin: its fields'
    values, with ``fields`` typed or ticked."""
    form = page.find("form", class_="confirm")
    values = {i.attrs["name"]: i.attrs.get("value", "") for i in form.find_all("input")
              if i.attrs.get("type") != "checkbox"}
    values |= {t.attrs["name"]: t.text for t in form.find_all("textarea")}
    values |= fields
    return ui.post(form.attrs["action"], data=values, headers=SAME_ORIGIN,
                   follow_redirects=False)


# -- what the page shows ----------------------------------------------------------------------

def test_the_page_shows_provenance_trust_validity_and_revisions(world: World,
                                                                 ui: TestClient) -> None:
    page = dom(ui.get("/ui/memory/ann"))
    first = next(i for i in world.store.history(world.ann_cid) if i.kind is ItemKind.USER)
    stated = page.by_id(f"entry-{world.ann_entry}")
    assert stated.attrs["data-state"] == "current"
    assert stated.find("p", class_="memory-text").text == "Ann is flying to Lisbon in May"
    link = stated.find("a", class_="provenance")
    assert link.attrs["href"] == f"/ui/c/{world.ann_cid}?before={first.seq + 1}#seq-{first.seq}"
    assert stated.find(data_field="trust").text == "trusted · user_stated"

    inferred = page.by_id(f"entry-{world.ann_inferred}")
    assert inferred.find(data_field="trust").text == "not trusted · model_inferred"
    assert inferred.find(data_field="validity").text == \
        "from 2026-03-01T09:00:00+00:00 to 2027-03-01T09:00:00+00:00"
    assert "not from a conversation" in inferred.find(data_field="provenance").text

    edited = page.by_id(f"entry-{world.ann_edited}")
    assert edited.find("p", class_="memory-text").text == "Ann's hotel is the Rio Azul"
    (revision,) = edited.find_all("li", class_="revision")
    assert revision.attrs["data-entry-id"] == world.ann_original
    assert revision.find("p", class_="memory-text").text == "Ann's hotel is the Tejo Palace"
    assert "edited by the user" in revision.text
    # each entry once: the replaced version only inside its chain
    shown = [a.attrs["data-entry-id"] for a in page.find_all("article")]
    assert world.ann_original not in shown
    assert sorted(shown) == sorted(e.id for e in MemoryStore(world.store).entries("ann"))
    assert world.bob_entry not in page.by_id("main").text


def test_entries_no_longer_current_are_shown_apart(world: World, ui: TestClient) -> None:
    memory = MemoryStore(world.store, clock=world.clock)
    memory.invalidate("ann", world.ann_inferred, "the user said it is wrong")
    page = dom(ui.get("/ui/memory/ann"))
    gone = page.by_id(f"entry-{world.ann_inferred}")
    assert gone.attrs["data-state"] == "withdrawn: the user said it is wrong"
    assert "past" in gone.attrs["class"].split()
    assert not gone.find_all("a", href=f"/ui/memory/ann/{world.ann_inferred}/edit")


# -- edit, delete, forget: as the CLI does them -----------------------------------------------

def test_an_edit_changes_the_store_exactly_as_memory_edit(twins: Twins) -> None:
    w, before = twins.world, table_rows(twins.cli_db)
    form = dom(twins.ui.get(f"/ui/memory/ann/{w.ann_entry}/edit"))
    done = submit(twins.ui, form, text="Ann is flying to Lisbon in June", confirm="yes")
    assert done.status_code == 303
    assert done.headers["location"].endswith("/ui/memory/ann?done=edited")
    twins.cli("memory", "edit", w.ann_entry, "Ann is flying to Lisbon in June", "--user", "ann")
    twins.compare(before)
    (now,) = [e for e in MemoryStore(w.store).entries("ann")
            if "Lisbon" in e.text and e.kind is not MemoryKind.TURN]  # the fact, not its turn
    assert (now.text, now.supersedes, now.source) == (
        "Ann is flying to Lisbon in June", w.ann_entry, "user_stated")


def test_a_delete_is_real_and_the_same_as_memory_delete(twins: Twins) -> None:
    w, before = twins.world, table_rows(twins.cli_db)
    # the corrected entry: its deletion takes the version it replaced with it
    form = dom(twins.ui.get(f"/ui/memory/ann/{w.ann_edited}/delete"))
    assert submit(twins.ui, form, confirm="yes").status_code == 303
    twins.cli("memory", "delete", "--user", "ann", w.ann_edited, "--yes")
    twins.compare(before)
    for table, rows in table_rows(twins.ui_db).items():
        for row in rows:
            for gone in (w.ann_edited, w.ann_original, "Rio Azul", "Tejo Palace"):
                assert gone not in repr(row), (table, gone)
    assert dom(twins.ui.get("/ui/memory/ann?done=deleted")).find("p", class_="notice")


def test_forgetting_a_user_leaves_nothing_in_any_table_as_memory_delete_all(
        twins: Twins) -> None:
    w, before = twins.world, table_rows(twins.cli_db)
    assert any("zed-7f3a" in repr(row) for rows in before.values() for row in rows)
    count = len(MemoryStore(w.store).entries("zed-7f3a", history=True))
    form = dom(twins.ui.get("/ui/memory/zed-7f3a/forget"))
    assert count > 1 and f"{count} entries, history included" in form.text
    assert submit(twins.ui, form, confirm="zed-7f3a").status_code == 303
    twins.cli("memory", "delete", "--user", "zed-7f3a", "--all", "--yes")
    twins.compare(before)
    for table, rows in table_rows(twins.ui_db).items():
        for row in rows:
            assert "zed-7f3a" not in repr(row), table
    assert MemoryStore(w.store).entries("ann")  # another user's memory is untouched


# -- refusals: each changes nothing -----------------------------------------------------------

def test_every_change_needs_its_confirmation(world: World, ui: TestClient,
                                             tmp_path: Path) -> None:
    before = table_rows(tmp_path / "threadline.db")
    for path, data in [(f"/ui/memory/ann/{world.ann_entry}/edit", {"text": "changed"}),
                       (f"/ui/memory/ann/{world.ann_entry}/edit",
                        {"text": "changed", "confirm": "no"}),
                       (f"/ui/memory/ann/{world.ann_entry}/delete", {}),  # not ticked
                       ("/ui/memory/ann/forget", {"confirm": "yes"}),   # the id, typed
                       ("/ui/memory/ann/forget", {"confirm": "Ann"})]:
        refused = ui.post(path, content=urlencode(data), headers={
            **SAME_ORIGIN, "Content-Type": "application/x-www-form-urlencoded"})
        assert refused.status_code == 400, (path, data)
        assert "confirmation" in refused.json()["error"]["message"]
        assert "nothing was changed" in refused.json()["error"]["message"]
    assert table_rows(tmp_path / "threadline.db") == before
    for path in (f"/ui/memory/ann/{world.ann_entry}/edit",
                 f"/ui/memory/ann/{world.ann_entry}/delete", "/ui/memory/ann/forget"):
        form = dom(ui.get(path)).find("form", class_="confirm")
        assert form.attrs["method"] == "post"
        assert any("required" in i.attrs for i in form.find_all("input")
                   if i.attrs["name"] == "confirm")


def test_an_empty_correction_is_refused_and_changes_nothing(world: World, ui: TestClient,
                                                           tmp_path: Path) -> None:
    before = table_rows(tmp_path / "threadline.db")
    refused = ui.post(f"/ui/memory/ann/{world.ann_entry}/edit",
                      data={"text": "  ", "confirm": "yes"}, headers=SAME_ORIGIN)
    assert refused.status_code == 400
    assert "needs text" in refused.json()["error"]["message"]
    assert table_rows(tmp_path / "threadline.db") == before


@pytest.mark.parametrize("headers", [
    {"Origin": "https://evil.example"},
    {"Origin": "http://testserver.evil.example"},
    {"Sec-Fetch-Site": "cross-site"},
    {},  # says nowhere: not a browser on one of the pages
], ids=["another-site", "a-lookalike", "cross-site-fetch", "no-origin"])
def test_a_cross_site_post_changes_nothing(world: World, ui: TestClient, tmp_path: Path,
                                           headers: dict[str, str]) -> None:
    before = table_rows(tmp_path / "threadline.db")
    for path, data in [(f"/ui/memory/ann/{world.ann_entry}/edit",
                        {"text": "pwned", "confirm": "yes"}),
                       (f"/ui/memory/ann/{world.ann_entry}/delete", {"confirm": "yes"}),
                       ("/ui/memory/ann/forget", {"confirm": "ann"})]:
        refused = ui.post(path, data=data, headers=headers)
        assert refused.status_code == 403, path
        assert refused.json()["error"]["type"] == "Forbidden"
    assert table_rows(tmp_path / "threadline.db") == before
    # the same request from the page itself goes through
    sent = ui.post(f"/ui/memory/ann/{world.ann_entry}/delete", data={"confirm": "yes"},
                   headers={"Sec-Fetch-Site": "same-origin"}, follow_redirects=False)
    assert sent.status_code == 303


def test_a_user_token_reaches_only_its_own_memory(world: World, tmp_path: Path) -> None:
    bearer = tokens(world.store)
    ui = client(world)
    before = table_rows(tmp_path / "threadline.db")
    as_bob = {"Authorization": bearer["bob"]}
    for path in ("/ui/memory/ann", f"/ui/memory/ann/{world.ann_entry}/edit",
                 f"/ui/memory/ann/{world.ann_entry}/delete", "/ui/memory/ann/forget"):
        refused = ui.get(path, headers=as_bob)
        assert refused.status_code == 403, path
        assert "Ann is flying" not in refused.text
    for path, data in [(f"/ui/memory/ann/{world.ann_entry}/edit",
                        {"text": "bob was here", "confirm": "yes"}),
                       (f"/ui/memory/ann/{world.ann_entry}/delete", {"confirm": "yes"}),
                       ("/ui/memory/ann/forget", {"confirm": "ann"})]:
        assert ui.post(path, data=data, headers={**as_bob, **SAME_ORIGIN}).status_code == 403
    # Bob cannot reach Ann's entry through his own user either
    assert ui.post(f"/ui/memory/bob/{world.ann_entry}/delete", data={"confirm": "yes"},
                   headers={**as_bob, **SAME_ORIGIN}).status_code == 404
    assert table_rows(tmp_path / "threadline.db")["memory_entries"] == \
        before["memory_entries"]
    own = dom(ui.get("/ui/memory/bob", headers=as_bob))
    assert own.by_id(f"entry-{world.bob_entry}")
    assert dom(ui.get("/ui/memory/ann", headers={"Authorization": bearer["admin"]}))
    assert ui.get("/ui/memory/ann/mem_nosuch/edit",
                  headers={"Authorization": bearer["ann"]}).status_code == 404
    assert ui.get("/ui/memory/ann").status_code == 401


def test_a_form_not_sent_as_a_form_is_refused(world: World, ui: TestClient,
                                              tmp_path: Path) -> None:
    before = table_rows(tmp_path / "threadline.db")
    refused = ui.post(f"/ui/memory/ann/{world.ann_entry}/delete", json={"confirm": "yes"},
                      headers=SAME_ORIGIN)
    assert refused.status_code == 400
    assert "application/x-www-form-urlencoded" in refused.json()["error"]["message"]
    assert table_rows(tmp_path / "threadline.db") == before


def test_the_validity_shown_is_the_stored_one(world: World, ui: TestClient) -> None:
    entry = MemoryStore(world.store).get("ann", world.ann_inferred)
    assert entry.valid_from == T0
    page = dom(ui.get("/ui/memory/ann"))
    assert entry.valid_from.isoformat() in page.by_id(f"entry-{entry.id}").text
