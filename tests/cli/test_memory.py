"""``threadline memory``: the user reads, corrects and deletes."""

from __future__ import annotations

import json
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
    assert tl("memory", "delete", "--user", "ann", edited["id"], "--yes").code == 0
    assert [e["text"] for e in tl("memory", "list", "--user", "ann", "--all", "--json").json()
            ] == ["Ann may like jazz"]
    forgot = tl("memory", "delete", "--user", "ann", "--all", "--yes")
    assert forgot.code == 0 and forgot.out.strip() == (
        "deleted everything remembered about ann: 1 entries")
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
            (("memory", "delete", entry, "--user", "bob", "--yes"), 3, "has no memory entry"),
            (("memory", "delete", entry, "--user", "ann"), 2, "pass --yes to confirm"),
            (("memory", "delete", "--user", "ann", "--all"), 2, "pass --yes to confirm"),
            (("memory", "delete", "--expired"), 2, "pass --yes to confirm"),
            (("memory", "delete", "--user", "ann", "--yes"), 2, "say what to delete"),
            (("memory", "delete", entry, "--all", "--user", "ann", "--yes"), 2,
             "say what to delete"),
            (("memory", "delete", "--all", "--expired", "--yes"), 2, "say what to delete"),
            (("memory", "delete", entry, "--yes"), 2, "ENTRY needs --user U"),
            (("memory", "delete", "--all", "--yes"), 2, "--all needs --user U"),
            (("memory", "delete", "--expired", "--user", "ann", "--yes"), 2,
             "it takes no --user"),
            (("memory", "add", "--user", "ann", "x" * 5000), 2, "over the limit"),
            (("memory", "add", "--user", "ann", "   "), 2, "needs text"),
            (("memory", "add", "--user", "ann", "t", "--valid-to", "soon"), 2, "not a date"),
            (("memory", "list"), 2, "Missing option '--user'")]:
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
    assert tl("memory", "learn", "--json").json()["learned_from"] == 1
    listed = tl("memory", "list", "--user", "ann", "--json").json()
    # the fact, and the message as said less the instruction (a turn, for recall)
    assert sorted((e["kind"], e["text"]) for e in listed) == [
        ("fact", "I live in Oslo"), ("turn", "I live in Oslo.")]
    decided = tl("memory", "jobs", "--json").json()[0]["decisions"]
    assert [d["decision"] for d in decided] == ["REJECT", "ADD", "TURN"]


def _texts(tl: Invoke, user: str) -> list[str]:
    return sorted(e["text"] for e in tl("memory", "list", "--user", user, "--json").json())


def test_an_export_to_a_file_or_a_directory_round_trips_through_import(
        tl: Invoke, tmp_path: Path) -> None:
    first = tl("memory", "add", "--user", "ann", "Ann lives in Oslo", "--json").json()
    tl("memory", "add", "--user", "ann", "Ann skis", "--kind", "procedure")
    tl("memory", "edit", first["id"], "Ann lives in Bergen", "--user", "ann")
    tl("memory", "add", "--user", "ann", "Ann's old badge", "--expires", "2000-01-01")
    before = _texts(tl, "ann")
    assert before == ["Ann lives in Bergen", "Ann skis"]
    out = tmp_path / "ann.json"
    (tmp_path / "exports").mkdir()
    # the revised Oslo entry and the expired badge are history, not memory: the second
    # export, of what the first import made, has none
    for args, written, skipped in [(("--out", str(out)), out, 2),
                                   (("--dir", str(tmp_path / "exports")),
                                    tmp_path / "exports" / "ann.json", 0)]:
        exported = tl("memory", "export", "--user", "ann", *args)
        assert exported.code == 0, exported.err
        assert exported.out.strip() == str(written)
        assert json.loads(written.read_text())["user_id"] == "ann"
        tl("memory", "delete", "--user", "ann", "--all", "--yes")
        imported = tl("memory", "import", str(written), "--user", "ann")
        assert imported.code == 0, imported.err
        assert imported.out.strip() == (
            f"imported 2 entries for ann ({skipped} history entries skipped)")
        assert _texts(tl, "ann") == before
        kinds = {e["text"]: e["kind"] for e in
                 tl("memory", "list", "--user", "ann", "--json").json()}
        assert kinds["Ann skis"] == "procedure"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp


def test_a_hostile_user_id_never_writes_outside_the_export_directory(
        tl: Invoke, tmp_path: Path) -> None:
    for user in ["../../etc/passwd", "/abs", "a/../../b", "..", "x\\y", ".", "a\x00b", "%2F",
                 "é" * 200]:
        tl("memory", "add", "--user", user, "a fact")
        directory = tmp_path / "exports"
        directory.mkdir()
        exported = tl("memory", "export", "--user", user, "--dir", str(directory))
        assert exported.code == 0, (user, exported.err)
        [written] = directory.iterdir()
        assert written.parent == directory and not written.is_symlink(), user
        assert exported.out.strip() == str(written)
        assert set(written.stem) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-%~"), user
        assert len(written.name) <= 255
        assert json.loads(written.read_text())["user_id"] == user
        written.unlink()
        directory.rmdir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    names: set[str] = set()
    for n, user in enumerate(["a/b", "a%2Fb", "a_b", "a-b", "a.b"]):  # never one file for two
        directory = tmp_path / f"d{n}"
        directory.mkdir()
        tl("memory", "export", "--user", user, "--dir", str(directory))
        names |= {p.name for p in directory.iterdir()}
    assert len(names) == 5


def test_a_link_at_the_export_target_is_refused(tl: Invoke, tmp_path: Path) -> None:
    tl("memory", "add", "--user", "ann", "Ann's door code is 4711")
    directory, outside = tmp_path / "exports", tmp_path / "outside"
    directory.mkdir()
    outside.mkdir()
    victim = outside / "victim.json"
    (directory / "ann.json").symlink_to(victim)
    for extra in [(), ("--force",)]:
        refused = tl("memory", "export", "--user", "ann", "--dir", str(directory), *extra)
        assert refused.code == 2 and "nothing was written" in refused.err, refused.err
    assert not victim.exists() and list(outside.iterdir()) == []
    assert [p.name for p in directory.iterdir()] == ["ann.json"]
    assert (directory / "ann.json").is_symlink()


def test_export_out_does_not_overwrite_without_force(tl: Invoke, tmp_path: Path) -> None:
    tl("memory", "add", "--user", "ann", "Ann skis")
    out = tmp_path / "ann.json"
    out.write_text("keep me")
    refused = tl("memory", "export", "--user", "ann", "--out", str(out))
    assert refused.code == 2 and "already exists" in refused.err and "--force" in refused.err
    assert out.read_text() == "keep me"
    for args, message in [(("--out", str(tmp_path)), "is a directory"),
                          (("--out", str(tmp_path / "no" / "f.json")), "cannot write"),
                          (("--dir", str(tmp_path / "missing")), "no directory"),
                          (("--out", str(out), "--dir", str(tmp_path)), "not both")]:
        result = tl("memory", "export", "--user", "ann", *args)
        assert result.code == 2 and message in result.err, (args, result.err)
    forced = tl("memory", "export", "--user", "ann", "--out", str(out), "--force")
    assert forced.code == 0, forced.err
    assert [e["text"] for e in json.loads(out.read_text())["entries"]] == ["Ann skis"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ann.json", "home"]


def test_a_bad_import_is_refused_and_changes_nothing(tl: Invoke, tmp_path: Path) -> None:
    tl("memory", "add", "--user", "bob", "Bob has a cat")
    bobs = tmp_path / "bob.json"
    tl("memory", "export", "--user", "bob", "--out", str(bobs))
    tl("memory", "add", "--user", "ann", "Ann skis")
    good = json.loads(bobs.read_text())["entries"][0]

    def document(*entries: object) -> str:
        return json.dumps({"user_id": "ann", "entries": list(entries)})

    files: dict[str, bytes | str] = {
        "not-json.json": "{not json",
        "latin1.json": document(good).replace("Bob", "B\u00f6b").encode("latin-1"),
        "bad-kind.json": document(good, {**good, "kind": "rumour"}),
        "no-text.json": document(good, {**good, "text": 7}),
        "bad-time.json": document({**good, "valid_to": "next week"}),
        "not-an-entry.json": document(good, "just text"),
        "oversized.json": document(good, {**good, "text": "x" * 5000}),
        "no-entries.json": json.dumps({"user_id": "ann"}),
    }
    for name, content in files.items():
        path = tmp_path / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(16 * 1024 * 1024 + 1)
    before = tl("memory", "list", "--user", "ann", "--all", "--json").json()
    for file, message in [(bobs, "another user's memory"),
                          (tmp_path / "not-json.json", "is not JSON"),
                          (tmp_path / "latin1.json", "not valid UTF-8"),
                          (tmp_path / "bad-kind.json", "entry 1: kind"),
                          (tmp_path / "no-text.json", "entry 1: text"),
                          (tmp_path / "bad-time.json", "entry 0: valid_to"),
                          (tmp_path / "not-an-entry.json", "entry 1: the entry is not an object"),
                          (tmp_path / "oversized.json", "entry 1: text is 5,000 bytes"),
                          (tmp_path / "no-entries.json", "not a memory export"),
                          (huge, "over the import limit"),
                          (tmp_path / "missing.json", "no file"),
                          (tmp_path, "is not a file")]:
        result = tl("memory", "import", str(file), "--user", "ann")
        assert result.code == 2 and message in result.err, (file, result.err)
        assert "nothing was" in result.err and "hint:" in result.err, result.err
    assert tl("memory", "list", "--user", "ann", "--all", "--json").json() == before
    assert _texts(tl, "bob") == ["Bob has a cat"]


def test_import_marks_entries_imported_unless_trusted(tl: Invoke, tmp_path: Path) -> None:
    tl("memory", "add", "--user", "ann", "Ann lives in Oslo")
    tl("memory", "add", "--user", "ann", "Ann may like jazz", "--source", "model_inferred")
    out = tmp_path / "ann.json"
    tl("memory", "export", "--user", "ann", "--out", str(out))
    for extra, expected in [((), {"Ann lives in Oslo": ("imported", False),
                                  "Ann may like jazz": ("imported", False)}),
                            (("--trust",), {"Ann lives in Oslo": ("user_stated", True),
                                            "Ann may like jazz": ("model_inferred", False)})]:
        tl("memory", "delete", "--user", "ann", "--all", "--yes")
        imported = tl("memory", "import", str(out), "--user", "ann", "--json", *extra)
        assert imported.code == 0, imported.err
        report = imported.json()
        assert (report["user_id"], report["imported"], report["skipped"]) == ("ann", 2, 0)
        listed = tl("memory", "list", "--user", "ann", "--json").json()
        assert sorted(e["id"] for e in listed) == sorted(report["entries"])
        assert {e["text"]: (e["source"], e["trusted"]) for e in listed} == expected
        assert all(e["conversation_id"] is None for e in listed)


def test_delete_expired_deletes_expired_entries_for_real(tl: Invoke) -> None:
    tl("memory", "add", "--user", "ann", "Ann's old badge is B-17", "--expires", "2000-01-01")
    tl("memory", "add", "--user", "ann", "Ann skis", "--expires", "2999-01-01")
    tl("memory", "add", "--user", "bob", "Bob's old badge", "--expires", "2000-01-01")
    assert len(tl("memory", "list", "--user", "ann", "--all", "--json").json()) == 2
    purged = tl("memory", "delete", "--expired", "--yes", "--json")
    assert purged.code == 0 and purged.json() == {"deleted": 2}
    assert [e["text"] for e in tl("memory", "list", "--user", "ann", "--all", "--json").json()
            ] == ["Ann skis"]
    assert tl("memory", "list", "--user", "bob", "--all", "--json").json() == []
    assert tl("memory", "delete", "--expired", "--yes").out.strip() == (
        "deleted 0 expired entries")


def test_an_interactive_chat_with_a_user_says_what_it_recalled(tl: Invoke) -> None:
    tl("memory", "add", "--user", "ann", "I live in Oslo near the fjord")
    run = tl("chat", "--new", "--user", "ann", input="Where do I live?\nHello there\n/exit\n")
    assert run.code == 0, run.err
    assert "1 memory recalled" in run.err and "0 memories recalled" in run.err


def test_memory_recall_with_embeddings(tl: Invoke) -> None:
    from tests.retrieval.test_dense import require_dense

    require_dense()
    tl("memory", "add", "--user", "ann", "I adopted two cats from the shelter")
    question = "What animals did I bring home recently?"  # not one word in common
    assert tl("memory", "recall", "--user", "ann", question, "--json").json()["memories"] == []
    dense = tl("memory", "recall", "--user", "ann", question, "--dense", "--json").json()
    assert [m["text"] for m in dense["memories"]] == ["I adopted two cats from the shelter"]
    assert dense["threshold"] == 0.25
    by_setting = tl("memory", "recall", "--user", "ann", question, "--json",
                    env={"THREADLINE_MEMORY_DENSE": "1"}).json()
    assert by_setting["memories"] == dense["memories"]
