from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.cli.conftest import Invoke, snapshot


def _conversation(tl: Invoke, *messages: str) -> str:
    cid: str = tl("chat", "--once", messages[0], "--json").json()["conversation_id"]
    for text in messages[1:]:
        tl("chat", "--once", text, "--conversation", cid)
    return cid


def test_list_shows_conversations_newest_first(tl: Invoke) -> None:
    assert tl("conversations", "list", "--json").json() == []
    empty = tl("conversations", "list")
    assert empty.code == 0 and "no conversations yet" in empty.err
    first = _conversation(tl, "first conversation")
    second = _conversation(tl, "second conversation", "more")
    listed = tl("conversations", "list", "--json").json()
    assert [c["id"] for c in listed] == [second, first]
    assert (listed[0]["turns"], listed[0]["title"]) == (2, "second conversation")
    table = tl("conversations", "list").out.splitlines()
    assert table[0].split() == ["ID", "UPDATED", "(UTC)", "TURNS", "BRANCHES", "TITLE"]
    assert table[1].startswith(second)
    assert [c["id"] for c in tl("conversations", "list", "--limit", "1", "--json").json()] == [
        second]


def test_show_prints_every_item_of_a_branch(tl: Invoke) -> None:
    cid = _conversation(tl, "line one\nline two", "next")
    shown = tl("conversations", "show", cid)
    assert shown.code == 0
    assert "#1    turn 1   user\n        line one\n        line two" in shown.out
    body = tl("conversations", "show", cid, "--json").json()
    assert [i["kind"] for i in body["items"]] == ["user_message", "assistant_message"] * 2
    assert body["branches"][0]["name"] == "main" and body["items"][0]["hash"].startswith("b2:")


def test_fork_then_continue_the_branch(tl: Invoke) -> None:
    cid = _conversation(tl, "question one", "question two")
    fork = tl("conversations", "fork", cid, "--from", "2", "--name", "alt", "--json").json()
    assert (fork["name"], fork["parent"], fork["fork_seq"]) == ("alt", "main", 2)
    tl("chat", "--once", "alternative two", "--conversation", cid, "--branch", "alt")
    alt = tl("conversations", "show", cid, "--branch", "alt", "--json").json()["items"]
    main = tl("conversations", "show", cid, "--json").json()["items"]
    assert [i["content"]["text"] for i in alt][2] == "alternative two"
    assert [i["content"]["text"] for i in main][2] == "question two"
    auto = tl("conversations", "fork", cid, "--from", "1")
    assert auto.code == 0 and "created branch b3" in auto.out
    dup = tl("conversations", "fork", cid, "--from", "1", "--name", "alt")
    assert dup.code == 2 and "already has a branch named 'alt'" in dup.err


def test_delete_needs_confirmation_then_removes_everything(tl: Invoke, home: Path) -> None:
    keep = _conversation(tl, "keep")
    gone = _conversation(tl, "delete me")
    before = snapshot(home)
    refused = tl("conversations", "delete", gone)
    assert refused.code == 2 and "--yes" in refused.err
    assert snapshot(home) == before
    run = tl("conversations", "delete", gone, "--yes")
    assert run.code == 0 and "deleted" in run.out and "2 items" in run.out
    conn = sqlite3.connect(home / "threadline.db")
    for table in ("conversations", "branches", "items", "model_calls"):
        column = "id" if table == "conversations" else "conversation_id"
        assert conn.execute(f"SELECT count(*) FROM {table} WHERE {column} = ?",
                            (gone,)).fetchone()[0] == 0
    assert [c["id"] for c in tl("conversations", "list", "--json").json()] == [keep]


def test_verify_reports_tampering(tl: Invoke, home: Path) -> None:
    cid = _conversation(tl, "original words", "more words")
    ok = tl("conversations", "verify", cid, "--json")
    assert ok.code == 0 and ok.json() == {"conversation_id": cid, "ok": True, "problems": []}
    conn = sqlite3.connect(home / "threadline.db")
    conn.execute("UPDATE items SET content = '{\"text\":\"forged\"}' WHERE seq = 1")
    conn.commit()
    conn.close()
    bad = tl("conversations", "verify", cid)
    assert bad.code == 1 and "item 1 (branch main): hash does not match" in bad.out
