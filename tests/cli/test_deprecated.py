"""The previous release's spellings: hidden, each warns once on stderr, then does exactly what
the new spelling does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke, Run, snapshot
from tests.cli.test_corpus import _docs
from threadline.cli._reference import render


@dataclass(frozen=True)
class Alias:
    old: str                                      # as the warning spells it
    new: str
    prepare: Callable[[Invoke, Path], list[str]]  # state in a fresh home; values for {0}, {1}
    old_args: list[str]
    new_args: list[str]


def _conversation(tl: Invoke, _: Path) -> list[str]:
    cid: str = tl("chat", "--once", "Always use British spelling. Order A-1234.",
                  "--json").json()["conversation_id"]
    for n in range(1, 4):
        tl("chat", "--once", f"Turn {n}: invoice INV-{n:03d} for FY2025." + " More." * 30,
           "--conversation", cid)
    return [cid]


def _constraint(tl: Invoke, tmp_path: Path) -> list[str]:
    [cid] = _conversation(tl, tmp_path)
    return [cid, str(tl("constraints", "add", cid, "Be brief.", "--json").json()["seq"])]


def _corpus(tl: Invoke, tmp_path: Path) -> list[str]:
    assert tl("corpus", "add", "filings", str(_docs(tmp_path))).code == 0
    return []


def _memory(tl: Invoke, _: Path) -> list[str]:
    tl("memory", "add", "--user", "ann", "Ann skis")
    tl("memory", "add", "--user", "ann", "Ann's old badge", "--expires", "2000-01-01")
    return []


QUESTION = "What was Company Y's revenue in FY2025?"
ALIASES = [
    Alias("context", "conversations context", _conversation,
          ["context", "{0}"], ["conversations", "context", "{0}"]),
    Alias("compact", "conversations compact", _conversation,
          ["compact", "{0}", "--budget", "150", "--json"],
          ["conversations", "compact", "{0}", "--budget", "150", "--json"]),
    Alias("ask", "corpus ask NAME TEXT", _corpus,
          ["ask", "--corpus", "filings", QUESTION], ["corpus", "ask", "filings", QUESTION]),
    Alias("corpus remove", "corpus delete", _corpus,
          ["corpus", "remove", "filings", "--yes"], ["corpus", "delete", "filings", "--yes"]),
    Alias("constraints remove", "constraints delete", _constraint,
          ["constraints", "remove", "{0}", "{1}", "--yes"],
          ["constraints", "delete", "{0}", "{1}", "--yes"]),
    Alias("forget", "memory delete --all --user U", _memory,
          ["forget", "--user", "ann", "--yes"],
          ["memory", "delete", "--user", "ann", "--all", "--yes"]),
    Alias("memory purge", "memory delete --expired", _memory,
          ["memory", "purge", "--yes", "--json"],
          ["memory", "delete", "--expired", "--yes", "--json"]),
]


def _in(tl: Invoke, home: Path) -> Invoke:
    def invoke(*args: str, **kwargs: str) -> Run:
        return tl(*args, env={"THREADLINE_HOME": str(home)}, **kwargs)
    return invoke


@pytest.mark.parametrize("alias", ALIASES, ids=lambda a: a.old)
def test_an_old_spelling_warns_then_does_what_the_new_one_does(tl: Invoke, tmp_path: Path,
                                                               alias: Alias) -> None:
    old_home, new_home = tmp_path / "old", tmp_path / "new"
    old_tl, new_tl = _in(tl, old_home), _in(tl, new_home)
    old_values = alias.prepare(old_tl, tmp_path)
    new_values = alias.prepare(new_tl, tmp_path)
    old = old_tl(*[a.format(*old_values) for a in alias.old_args])
    new = new_tl(*[a.format(*new_values) for a in alias.new_args])
    assert (old.code, new.code) == (0, 0), (old.err, new.err)
    warning = f'warning: "threadline {alias.old}" is deprecated; use "threadline {alias.new}"'
    assert old.err.splitlines()[0] == warning and old.err.count("deprecated") == 1
    assert "deprecated" not in new.err
    assert old.out.strip() and _same(old, new, old_values, new_values), (old.out, new.out)
    assert len(snapshot(old_home)) == len(snapshot(new_home))


def _same(old: Run, new: Run, old_values: list[str], new_values: list[str]) -> bool:
    """The outputs agree once each home's own ids are written as placeholders."""
    out_old, out_new = old.out, new.out
    for n, (a, b) in enumerate(zip(old_values, new_values, strict=True)):
        out_old, out_new = out_old.replace(a, f"<{n}>"), out_new.replace(b, f"<{n}>")
    return out_old == out_new


def test_old_spellings_are_hidden(tl: Invoke) -> None:
    reference = render()
    for group, names in [((), ["ask", "forget", "compact", "context"]),
                         (("corpus",), ["remove"]), (("constraints",), ["remove"]),
                         (("memory",), ["purge"])]:
        listed = tl(*group, "--help").out.split("Commands:")[1]
        for name in names:
            assert f"  {name} " not in listed, (group, name)
            assert f"`threadline {' '.join([*group, name])}`" not in reference
    assert "## `threadline corpus delete`" in reference


def test_an_old_destructive_spelling_keeps_the_confirmation_rule(tl: Invoke,
                                                                 home: Path) -> None:
    tl("memory", "add", "--user", "ann", "Ann skis")
    before = snapshot(home)
    refused = tl("forget", "--user", "ann")
    assert refused.code == 2 and "pass --yes to confirm" in refused.err
    assert refused.err.startswith('warning: "threadline forget" is deprecated')
    assert snapshot(home) == before
    refused = tl("constraints", "remove", "c_missing", "1")
    assert refused.code == 3 and "no conversation" in refused.err
