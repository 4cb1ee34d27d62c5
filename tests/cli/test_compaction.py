"""``threadline conversations context|compact``, ``constraints`` and ``state``, including
every refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Invoke, snapshot

LONG = " Details follow: the shipment data is long" * 6


def _conversation(tl: Invoke, turns: int = 6) -> str:
    cid: str = tl("chat", "--once", "Always use British spelling. Order A-1234.",
                  "--json").json()["conversation_id"]
    for n in range(1, turns):
        tl("chat", "--once", f"Turn {n}: invoice INV-{n:03d} for FY2025.{LONG}",
           "--conversation", cid)
    return cid


def test_context_shows_the_next_request_segment_by_segment(tl: Invoke) -> None:
    cid = _conversation(tl, 3)
    body = tl("conversations", "context", cid, "--json").json()
    kinds = [s["segment"] for s in body["segments"]]
    assert kinds == ["tools", "system", "pinned", "static", "summary", "history", "current"]
    history = body["segments"][5]
    assert [m["seq"] for m in history["messages"]] == [1, 2, 3, 4, 5, 6]
    assert body["tokens"] == sum(s["tokens"] for s in body["segments"]) > 0
    text = tl("conversations", "context", cid)
    assert text.code == 0 and "history (conversation" in text.out and "#1 user" in text.out


def test_compact_dry_run_then_for_real(tl: Invoke, home: Path) -> None:
    cid = _conversation(tl)
    before = snapshot(home)
    dry = tl("conversations", "compact", cid, "--budget", "150", "--dry-run", "--json").json()
    assert dry["applied"] is False and dry["plan"]["tokens_after"] < dry["plan"]["tokens_before"]
    assert snapshot(home) == before
    done = tl("conversations", "compact", cid, "--budget", "150", "--json").json()
    assert done["applied"] is True and done["plan"] == dry["plan"]
    context = tl("conversations", "context", cid, "--json").json()
    assert context["compaction_seq"] == done["compaction_seq"]
    assert context["segments"][2]["messages"][0]["content"] == (
        "Standing instructions:\n- Always use British spelling.")
    assert context["tokens"] == done["plan"]["tokens_after"]
    # the original items are all still in the log
    items = tl("conversations", "show", cid, "--json").json()["items"]
    assert sum(1 for i in items if i["kind"] == "user_message") == 6
    human = tl("conversations", "compact", cid, "--strategy", "pin")
    assert human.code == 0 and "compacted (event #" in human.out


def test_constraints_list_add_edit_delete(tl: Invoke) -> None:
    cid = _conversation(tl, 2)
    listed = tl("constraints", "list", cid, "--json").json()
    assert listed["constraints"] == []
    assert listed["detected_not_recorded"] == [{"text": "Always use British spelling.",
                                                "from_seq": 1}]
    added = tl("constraints", "add", cid, "Quote prices in EUR.", "--json").json()
    edited = tl("constraints", "add", cid, "Quote prices in GBP.", "--replaces",
                str(added["seq"]), "--json").json()
    listed = tl("constraints", "list", cid, "--json").json()["constraints"]
    assert [(c["text"], c["source"], c["pinned"]) for c in listed] == [
        ("Quote prices in GBP.", "user", False)]
    table = tl("constraints", "list", cid)
    assert "Quote prices in GBP." in table.out and "detected in message #1" in table.out
    deleted = tl("constraints", "delete", cid, str(edited["seq"]), "--yes")
    assert deleted.code == 0 and "deleted; the log keeps it" in deleted.out
    assert tl("constraints", "list", cid, "--json").json()["constraints"] == []


@pytest.mark.parametrize("args", [
    ["conversations", "context", "c_missing"],
    ["conversations", "compact", "c_missing"],
    ["constraints", "list", "c_missing"],
    ["constraints", "add", "c_missing", "Be brief."],
    ["constraints", "delete", "c_missing", "1", "--yes"],
    ["state", "show", "c_missing"],
])
def test_an_unknown_conversation_is_refused(tl: Invoke, home: Path, args: list[str]) -> None:
    _conversation(tl, 1)
    before = snapshot(home)
    run = tl(*args)
    assert run.code == 3 and "c_missing" in run.err
    assert snapshot(home) == before


def test_bad_compaction_and_constraint_requests_change_nothing(tl: Invoke, home: Path) -> None:
    cid = _conversation(tl, 2)
    before = snapshot(home)
    for args, code, message in [
        (["conversations", "compact", cid, "--budget", "0"], 2, "--budget"),
        (["conversations", "compact", cid, "--strategy", "shred"], 2, "--strategy"),
        (["conversations", "compact", cid, "--branch", "nope"], 3, "nope"),
        (["constraints", "delete", cid, "99"], 2, "not an active constraint"),
        (["constraints", "delete", cid, "99", "--yes"], 2, "not an active constraint"),
        (["constraints", "delete", cid, "1", "--branch", "nope", "--yes"], 3, "nope"),
        (["constraints", "add", cid, "   "], 2, "empty"),
        (["constraints", "add", cid, "x", "--replaces", "1"], 2, "not an active constraint"),
    ]:
        run = tl(*args)
        assert run.code == code, (args, run.err)
        assert message in run.err, (args, run.err)
    assert snapshot(home) == before


def test_compact_at_a_task_boundary(tl: Invoke, home: Path) -> None:
    cid = _conversation(tl, 4)
    refused = tl("conversations", "compact", cid, "--boundary", "--strategy", "window")
    assert refused.code == 2 and "--boundary" in refused.err
    done = tl("conversations", "compact", cid, "--boundary", "--json").json()
    assert done["applied"] is True
    assert (done["plan"]["strategy"], done["plan"]["reason"]) == ("summary", "task_boundary")


def test_state_show_and_update(tl: Invoke, home: Path) -> None:
    cid = _conversation(tl, 1)
    empty = tl("state", "show", cid)
    assert empty.code == 0 and "no working state yet" in empty.err
    shown = tl("state", "update", cid, '{"goal": "Ship v2", "add_steps": ["tag the release"]}',
               "--json").json()
    assert shown["goal"] == "Ship v2" and shown["steps"] == [{"text": "tag the release",
                                                               "status": "todo"}]
    assert "1. [todo] tag the release" in tl("state", "show", cid).out
    before = snapshot(home)
    for changes, message in [("{not json", "not valid JSON"), ("[1, 2]", "JSON object"),
                             ('{"colour": "red"}', "unknown working-state field"),
                             ('{"step_status": {"index": 5, "status": "done"}}', "no step 5")]:
        run = tl("state", "update", cid, changes)
        assert run.code == 2 and message in run.err, (changes, run.err)
    assert snapshot(home) == before
