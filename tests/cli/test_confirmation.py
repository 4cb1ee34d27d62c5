"""One rule for every destructive command: at a terminal it asks; with standard input that is
not a terminal it refuses unless --yes, exits non-zero and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke, snapshot
from tests.cli.test_corpus import _docs


@dataclass(frozen=True)
class Case:
    name: str
    prepare: Callable[[Invoke, Path], list[str]]  # state to delete; the command, less --yes
    gone: Callable[[Invoke], bool]                 # whether it was deleted


def _conversation(tl: Invoke, _: Path) -> list[str]:
    cid = tl("chat", "--once", "delete me", "--json").json()["conversation_id"]
    return ["conversations", "delete", cid]


def _corpus(tl: Invoke, tmp_path: Path) -> list[str]:
    assert tl("corpus", "add", "filings", str(_docs(tmp_path))).code == 0
    return ["corpus", "delete", "filings"]


def _constraint(tl: Invoke, _: Path) -> list[str]:
    cid = tl("chat", "--once", "hello", "--json").json()["conversation_id"]
    seq = tl("constraints", "add", cid, "Quote prices in EUR.", "--json").json()["seq"]
    return ["constraints", "delete", cid, str(seq)]


def _constraints_left(tl: Invoke) -> bool:
    cid = tl("conversations", "list", "--json").json()[0]["id"]
    return bool(tl("constraints", "list", cid, "--json").json()["constraints"] == [])


def _entry(tl: Invoke, _: Path) -> list[str]:
    entry = tl("memory", "add", "--user", "ann", "Ann skis", "--json").json()["id"]
    return ["memory", "delete", "--user", "ann", entry]


def _user(tl: Invoke, _: Path) -> list[str]:
    tl("memory", "add", "--user", "ann", "Ann skis")
    tl("memory", "add", "--user", "ann", "Ann lives in Oslo")
    return ["memory", "delete", "--user", "ann", "--all"]


def _expired(tl: Invoke, _: Path) -> list[str]:
    tl("memory", "add", "--user", "ann", "Ann's old badge", "--expires", "2000-01-01")
    return ["memory", "delete", "--expired"]


def _memory_left(tl: Invoke) -> bool:
    return bool(tl("memory", "list", "--user", "ann", "--all", "--json").json() == [])


CASES = [
    Case("conversation", _conversation,
         lambda tl: tl("conversations", "list", "--json").json() == []),
    Case("corpus", _corpus, lambda tl: tl("corpus", "list", "--json").json() == []),
    Case("constraint", _constraint, _constraints_left),
    Case("memory entry", _entry, _memory_left),
    Case("a user's memory", _user, _memory_left),
    Case("expired memory", _expired, _memory_left),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_without_a_terminal_it_needs_yes(tl: Invoke, home: Path, tmp_path: Path,
                                         case: Case) -> None:
    command = case.prepare(tl, tmp_path)
    before = snapshot(home)
    refused = tl(*command, input="y\n")  # an answer on a pipe is not a confirmation
    assert refused.code == 2, (refused.out, refused.err)
    assert "refusing to delete" in refused.err and "pass --yes to confirm" in refused.err
    assert "nothing was changed" in refused.err and refused.out == ""
    assert snapshot(home) == before and not case.gone(tl)
    done = tl(*command, "--yes")
    assert done.code == 0, done.err
    assert "deleted" in done.out and case.gone(tl)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_at_a_terminal_it_asks(tl: Invoke, home: Path, tmp_path: Path, case: Case,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("threadline.cli._common.stdin_is_terminal", lambda: True)
    command = case.prepare(tl, tmp_path)
    before = snapshot(home)
    kept = tl(*command, input="n\n")
    assert kept.code == 1 and "?" in kept.out and "Aborted" in kept.err
    assert snapshot(home) == before and not case.gone(tl)
    done = tl(*command, input="y\n")
    assert done.code == 0, done.err
    assert done.out.startswith("delete ") and "deleted" in done.out and case.gone(tl)


def test_json_reports_what_was_deleted(tl: Invoke, tmp_path: Path) -> None:
    command = _conversation(tl, tmp_path)
    body = tl(*command, "--yes", "--json").json()
    assert body == {"deleted": command[-1], "items": 2, "calls": 1}
    _corpus(tl, tmp_path)
    assert tl("corpus", "delete", "filings", "--yes", "--json").json() == {
        "deleted": "filings", "documents": 2, "chunks": 2}
    entry = _entry(tl, tmp_path)[-1]
    assert tl("memory", "delete", "--user", "ann", entry, "--yes", "--json").json() == {
        "user_id": "ann", "deleted": entry}
    _user(tl, tmp_path)
    assert tl("memory", "delete", "--user", "ann", "--all", "--yes", "--json").json() == {
        "user_id": "ann", "deleted": 2}
