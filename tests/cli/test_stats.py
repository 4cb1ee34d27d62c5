from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Invoke, snapshot
from tests.test_stats import record_known_turns
from threadline.stores.base import Store
from threadline.stores.sqlite import SQLiteStore


def _known(home: Path, url: str | None) -> list[str]:
    store: Store
    if url is None:
        home.mkdir(parents=True, exist_ok=True)
        store = SQLiteStore(home / "threadline.db")
    else:
        from threadline.stores.postgres import PostgresStore

        store = PostgresStore(url, max_connections=2)
    try:
        return record_known_turns(store)
    finally:
        store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest) -> tuple[str, ...]:
    return () if request.param == "sqlite" else (
        "--database-url", request.getfixturevalue("postgres_url"))


def test_stats_prints_the_curves_as_a_table_a_chart_and_json(
        tl: Invoke, home: Path, where: tuple[str, ...]) -> None:
    a, b, c = _known(home, where[1] if where else None)
    shown = tl(*where, "stats", "--profile", "none", "--input-price", "1", "--json")
    assert shown.code == 0, shown.err
    data = shown.json()
    assert (data["turns"], data["conversations"], data["profile"]) == (7, 3, "none")
    assert [(p["turn"], p["turns"]) for p in data["points"]] == [("1", 3), ("2", 3), ("3", 1)]
    assert data["points"][0]["ttft_ms"] == {"count": 3, "median": 200.0, "p90": 280.0}
    assert data["points"][1]["prompt_tokens"] == {"count": 3, "median": 2000, "p90": 2320.0}
    assert data["points"][1]["reuse_ratio"]["median"] == 0.75
    text = tl(*where, "stats", "--profile", "none", "--input-price", "1").out
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["TURN", "N", "TTFT_MS"]
    assert lines[1].split()[:5] == ["1", "3", "200.0", "/", "280.0"]
    assert "median by turn index (1 … 3):" in text
    assert "  reuse         ▁▇█  0% → 90%" in text  # 0, 0.75, 0.9
    assert "7 turns in 3 conversations · none at $1.0/M" in text
    narrowed = tl(*where, "stats", "--conversation", a, "--conversation", c, "--json").json()
    assert narrowed["conversations"] == 2
    since = tl(*where, "stats", "--since", "2026-03-02", "--json").json()
    assert since["conversations"] == 2 and since["since"] == "2026-03-02T00:00:00+00:00"
    assert b  # B is the one --since 2026-03-02 keeps with C


def test_an_empty_store_says_so_and_exits_0(tl: Invoke) -> None:
    empty = tl("stats")
    assert empty.code == 0 and empty.out.startswith("no turns recorded: nothing to chart yet")
    assert tl("stats", "--json").json()["points"] == []
    later = tl("stats", "--since", "1d")
    assert later.code == 0 and "no turns recorded since " in later.out


def test_bad_input_exits_non_zero_and_changes_nothing(tl: Invoke, home: Path) -> None:
    _known(home, None)
    before = snapshot(home)
    for args, code, message in [
            (("--since", "last week"), 2, "--since 'last week' is neither an ISO date"),
            (("--conversation", "c_nope"), 3, "c_nope"),
            (("--profile", "bogus"), 2, "unknown cache profile 'bogus'"),
            (("--group", "weekly"), 2, "Invalid value for '--group'")]:
        run = tl("stats", *args)
        assert run.code == code and message in run.err, (args, run.err)
    assert snapshot(home) == before
