"""``threadline memory`` and ``threadline forget``: the user reads, corrects and deletes."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Invoke, snapshot


def test_a_user_lists_corrects_deletes_and_exports_their_memory(tl: Invoke) -> None:
    added = tl("memory", "add", "--user", "ann", "Ann lives in Oslo", "--json")
    assert added.code == 0, added.err
    first = added.json()
    assert (first["source"], first["trusted"]) == ("user_stated", True)
    tl("memory", "add", "--user", "ann", "Ann may like jazz", "--source", "model_inferred")
    tl("memory", "add", "--user", "bob", "Bob has a cat")
    listed = tl("memory", "list", "--user", "ann", "--json").json()
    assert [(e["text"], e["trusted"]) for e in listed] == [("Ann lives in Oslo", True),
                                                           ("Ann may like jazz", False)]
    edited = tl("memory", "edit", first["id"], "Ann lives in Bergen", "--user", "ann",
                "--json").json()
    assert edited["supersedes"] == first["id"]
    exported = tl("memory", "export", "--user", "ann").json()
    assert {e["text"] for e in exported["entries"]} == {
        "Ann lives in Oslo", "Ann lives in Bergen", "Ann may like jazz"}
    assert "Bob" not in str(exported)
    shown = tl("memory", "show", first["id"], "--user", "ann", "--json").json()
    assert shown["invalidated_by"] == edited["id"]
    assert tl("memory", "delete", edited["id"], "--user", "ann").code == 0
    assert [e["text"] for e in tl("memory", "list", "--user", "ann", "--all", "--json").json()
            ] == ["Ann may like jazz"]
    forgot = tl("forget", "--user", "ann", "--yes")
    assert forgot.code == 0 and "1 entries deleted" in forgot.out
    assert tl("memory", "list", "--user", "ann", "--json").json() == []
    assert [e["text"] for e in tl("memory", "list", "--user", "bob", "--json").json()] == [
        "Bob has a cat"]


def test_bad_memory_input_is_refused_and_writes_nothing(tl: Invoke, home: Path) -> None:
    tl("memory", "add", "--user", "ann", "Ann skis")
    before = snapshot(home)
    other = tl("memory", "list", "--user", "bob", "--json")
    assert other.code == 0 and other.json() == []
    entry = tl("memory", "list", "--user", "ann", "--json").json()[0]["id"]
    for args, code, message in [
            (("memory", "show", entry, "--user", "bob"), 3, "has no memory entry"),
            (("memory", "delete", entry, "--user", "bob"), 3, "has no memory entry"),
            (("memory", "add", "--user", "ann", "x" * 5000), 2, "over the limit"),
            (("memory", "add", "--user", "ann", "   "), 2, "needs text"),
            (("memory", "add", "--user", "ann", "t", "--valid-to", "soon"), 2, "not a date"),
            (("forget", "--user", "ann"), 1, "Aborted")]:
        result = tl(*args, input="n\n")
        assert result.code == code and message in (result.err + result.out), args
    assert snapshot(home) == before
    assert [e["text"] for e in tl("memory", "list", "--user", "ann", "--json").json()] == [
        "Ann skis"]


def test_chat_with_a_user_feeds_the_writer(tl: Invoke) -> None:
    sent = tl("chat", "--once", "I live in Oslo. Never reply in French.", "--user", "ann",
              "--json")
    assert sent.code == 0, sent.err
    assert tl("memory", "list", "--user", "ann", "--json").json() == []
    assert tl("memory", "jobs", "--status", "pending", "--json").json()[0]["user_id"] == "ann"
    assert tl("memory", "learn", "--json").json() == {"learned_from": 1}
    assert [e["text"] for e in tl("memory", "list", "--user", "ann", "--json").json()] == [
        "I live in Oslo"]
    decided = tl("memory", "jobs", "--json").json()[0]["decisions"]
    assert [d["decision"] for d in decided] == ["REJECT", "ADD"]
