from __future__ import annotations

from pathlib import Path

import pytest

import threadline.providers.retrieval as retrieval
from tests.cli.conftest import Invoke, snapshot
from threadline.request import TailBlock


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "y.md").write_text("Company Y reported cloud revenue of $12.4 billion in FY2025.\n")
    return docs


def _conversation(tl: Invoke, tmp_path: Path, *where: str) -> tuple[str, list[str]]:
    """Turns through the CLI: plain, with a corpus, and on a fork."""
    assert tl(*where, "corpus", "add", "filings", str(_docs(tmp_path))).code == 0
    first = tl(*where, "chat", "--once", "hello", "--json").json()
    cid = first["conversation_id"]
    asked = tl(*where, "chat", "--once", "What was Company Y's cloud revenue?",
               "--conversation", cid, "--corpus", "filings", "--json").json()
    assert asked["retrieval"]["passages"]
    forked = tl(*where, "conversations", "fork", cid, "--from", str(first["reply_seq"]),
                "--name", "alt", "--json").json()
    alt = tl(*where, "chat", "--once", "and then?", "--conversation", cid, "--branch",
             forked["name"], "--json").json()
    return cid, [first["call_id"], asked["call_id"], alt["call_id"]]


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest) -> tuple[str, ...]:
    return () if request.param == "sqlite" else (
        "--database-url", request.getfixturevalue("postgres_url"))


def test_replay_finds_every_call_the_same_and_exits_0(tl: Invoke, tmp_path: Path,
                                                     where: tuple[str, ...]) -> None:
    cid, calls = _conversation(tl, tmp_path, *where)
    run = tl(*where, "replay", cid, "--json")
    assert run.code == 0, run.err
    shown = run.json()
    assert [c["call_id"] for c in shown["calls"]] == calls
    assert (shown["same"], shown["differs"], shown["skipped"]) == (3, 0, 0)
    assert {(c["outcome"], c["compared"]) for c in shown["calls"]} == {("same", "bytes")}
    one = tl(*where, "replay", calls[1])
    assert one.code == 0 and one.out.splitlines()[0].split()[:5] == [
        "CALL", "BRANCH", "TURN", "PURPOSE", "REQUEST"]
    assert one.out.splitlines()[1].split()[1:5] == ["main", "2", "turn", "same"]
    assert "1 calls: 1 same, 0 differ, 0 skipped" in one.out


def test_a_changed_renderer_is_named_and_exits_1(tl: Invoke, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cid, calls = _conversation(tl, tmp_path)
    original = retrieval.RetrievalProvider.render

    def render(self: retrieval.RetrievalProvider, history: object) -> list[TailBlock]:
        return [TailBlock(b.label.replace("cite them by id", "cite them"), b.text)
                for b in original(self, history)]  # type: ignore[arg-type]

    monkeypatch.setattr(retrieval.RetrievalProvider, "render", render)
    run = tl("replay", cid, "--json")
    assert run.code == 1
    outcomes = [(c["outcome"], c["difference"] and c["difference"]["segment"])
                for c in run.json()["calls"]]
    assert outcomes == [("same", None), ("differs", "tail"), ("same", None)]
    text = tl("replay", cid)
    assert text.code == 1
    assert f"{calls[1]}: the tail segment differs at byte " in text.out
    assert "3 calls: 2 same, 1 differ, 0 skipped" in text.out


def test_replay_with_a_model_compares_the_answers(tl: Invoke, tmp_path: Path) -> None:
    cid, _ = _conversation(tl, tmp_path)
    run = tl("replay", cid, "--model", "scripted", "--json")
    assert run.code == 0, run.err
    shown = run.json()
    assert shown["answers_differ"] == 0
    assert all(c["answer"]["same"] for c in shown["calls"])
    assert tl("replay", cid, "--model", "scripted").out.splitlines()[0].split()[-1] == "ANSWER"


def test_an_unknown_id_exits_3_and_a_replay_changes_nothing(tl: Invoke, tmp_path: Path,
                                                            home: Path) -> None:
    cid, _ = _conversation(tl, tmp_path)
    before = snapshot(home)
    assert tl("replay", cid, "--model", "scripted").code == 0
    assert snapshot(home) == before
    for target in ("call_nope", "c_nope"):
        run = tl("replay", target)
        assert run.code == 3
        assert f"no model call or conversation has the id {target!r}" in run.err
    assert tl("replay", "c_nope", "--model", "nope").code == 2
    assert snapshot(home) == before
