"""The export on SQLite and PostgreSQL: what the tables hold, queried with DuckDB; the same log
gives the same bytes; an interrupted export resumes without a duplicate row."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from threadline.audit import ExportOptions, Pricing, export, open_target
from threadline.cache.pricing import profile
from threadline.stores.base import Store
from threadline.stores.sqlite import SQLiteStore

from .conftest import Log, build_log

duckdb = pytest.importorskip("duckdb", reason="install the audit-test extra")

OPTIONS = ExportOptions(Pricing(profile("anthropic-5m"), 3.0))
UNTIL = date(2026, 3, 2)


def run(store: Store, out: Path, options: ExportOptions = OPTIONS, **kwargs: object):
    return export(store, open_target(str(out)), options, until=UNTIL, **kwargs)  # type: ignore[arg-type]


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def query(root: Path, table: str) -> str:
    return f"read_parquet('{root}/{table}/*/*.parquet', hive_partitioning = true)"


def test_the_tables_hold_the_log(log: Log, tmp_path: Path) -> None:
    out = tmp_path / "audit"
    result = run(log.store, out)
    store = log.store
    calls = [c for cid in (log.first, log.second) for c in store.calls(cid)]
    assert result.days == ["2026-03-01", "2026-03-02"]
    assert result.rows["calls"] == len(calls)
    db = duckdb.connect()
    assert db.execute(f"SELECT count(*) FROM {query(out, 'calls')}").fetchone()[0] == len(calls)
    # every call's request is in requests, byte for byte what the store rebuilds
    joined = db.execute(f"SELECT c.call_id, r.request, r.request_sha256 FROM "
                        f"{query(out, 'calls')} c JOIN {query(out, 'requests')} r "
                        "USING (request_sha256)").fetchall()
    assert len(joined) == len(calls)
    for call_id, request, sha in joined:
        exact = store.call(call_id).request.exact_bytes()  # type: ignore[union-attr]
        assert request == exact and hashlib.sha256(exact).hexdigest() == sha
    # turns join their calls: every call of a turn is in calls, and the tokens add up
    sums = db.execute(f"SELECT t.conversation_id, t.branch, t.turn, t.prompt_tokens, "
                  f"sum(c.prompt_tokens) FROM {query(out, 'turns')} t, unnest(t.call_ids) AS u(id)"
                  f" JOIN {query(out, 'calls')} c ON c.call_id = u.id GROUP BY ALL").fetchall()
    assert sums and all(row[3] == row[4] for row in sums)
    turns = {(r[0], r[1], r[2]): r[3:] for r in db.execute(
        f"SELECT conversation_id, branch, turn, status, query, rewritten_query, retrieved_ids,"
        f" recalled_ids, reply, calls, cost_usd, prefix_cause FROM {query(out, 'turns')}"
    ).fetchall()}
    first = turns[(log.first, "main", 1)]
    assert first[0] == "ok" and first[1] == "When is the Lisbon trip?"
    retrieval = next(i for i in store.history(log.first) if i.kind.value == "retrieval")
    assert first[3] == [p["id"] for p in retrieval.content["passages"]] != []
    assert first[4]                                          # a memory recalled
    assert first[7] > 0 and first[5].startswith("(scripted reply")
    assert turns[(log.first, "main", 3)][0] == "ok" and turns[(log.first, "main", 3)][6] == 2
    assert turns[(log.first, log.fork, 1)][0] == "ok"       # the regenerated reply
    assert (log.first, log.fork, 2) not in turns              # inherited turns stay on main
    failed = db.execute(f"SELECT count(*) FROM {query(out, 'calls')} WHERE status = 'failed'"
                    ).fetchone()[0]
    assert failed == 1
    [compaction] = db.execute(f"SELECT strategy, pinned_constraints, tokens_before, tokens_after "
                          f"FROM {query(out, 'compactions')}").fetchall()
    assert "Always answer in one sentence." in compaction[1]
    assert compaction[2] > compaction[3]
    writes = db.execute(f"SELECT user_id, decision, entry_source, entry_trusted, text FROM "
                    f"{query(out, 'memory_writes')} WHERE decision = 'ADD' ORDER BY user_id"
                    ).fetchall()
    assert ("ann", "ADD", "user_stated", True, "I live in Oslo") in writes
    assert any(w[0] == "bob" for w in writes)
    # a partition filter reads one day: the turns that started on it
    by_partition = db.execute(f"SELECT count(*) FROM {query(out, 'turns')} WHERE date = "
                          "'2026-03-02'").fetchone()[0]
    by_time = db.execute(f"SELECT count(*) FROM {query(out, 'turns')} WHERE started_at >= "
                     "TIMESTAMPTZ '2026-03-02 00:00:00+00'").fetchone()[0]
    assert by_partition == by_time >= 2


def test_the_same_log_gives_the_same_bytes(log: Log, tmp_path: Path) -> None:
    run(log.store, tmp_path / "a")
    run(log.store, tmp_path / "b")
    first = files(tmp_path / "a")
    assert first == files(tmp_path / "b") and "manifest.json" in first
    again = run(log.store, tmp_path / "a", since=date(2026, 3, 1))
    assert again.written == 0 and again.unchanged > 0 and files(tmp_path / "a") == first


def test_no_content_leaves_the_content_columns_out(log: Log, tmp_path: Path) -> None:
    full, bare = tmp_path / "full", tmp_path / "bare"
    run(log.store, full)
    run(log.store, bare, ExportOptions(OPTIONS.pricing, content=False))
    db = duckdb.connect()
    for table, gone in [("turns", {"query", "rewritten_query", "reply"}),
                        ("calls", {"response", "error"}), ("requests", {"request"}),
                        ("compactions", {"summary", "pinned_constraints"}),
                        ("memory_writes", {"text"})]:
        columns = {r[0] for r in db.execute(f"DESCRIBE SELECT * FROM {query(bare, table)}"
                                        ).fetchall()}
        kept = {r[0] for r in db.execute(f"DESCRIBE SELECT * FROM {query(full, table)}").fetchall()}
        assert gone <= kept and not gone & columns and kept - gone == columns
        counts = [db.execute(f"SELECT count(*) FROM {query(root, table)}").fetchone()[0]
                  for root in (full, bare)]
        assert counts[0] == counts[1] > 0
    text = b"".join(files(bare).values())
    assert b"Lisbon" not in text and b"Oslo" not in text


class Stop(Exception):
    pass


def test_an_interrupted_export_resumes_without_duplicates(log: Log, tmp_path: Path) -> None:
    small = ExportOptions(OPTIONS.pricing, rows_per_file=2)
    written: list[str] = []

    def stop_after_three(path: str) -> None:
        written.append(path)
        if len(written) == 3:
            raise Stop

    with pytest.raises(Stop):
        run(log.store, tmp_path / "cut", small, after_file=stop_after_three)
    resumed = run(log.store, tmp_path / "cut", small, since=date(2026, 3, 1))
    assert resumed.unchanged == 3 and resumed.written > 0
    run(log.store, tmp_path / "whole", small)
    assert files(tmp_path / "cut") == files(tmp_path / "whole")
    db = duckdb.connect()
    total, distinct = db.execute(f"SELECT count(*), count(DISTINCT call_id) FROM "
                             f"{query(tmp_path / 'cut', 'calls')}").fetchone()
    assert total == distinct == resumed.rows["calls"]


def test_a_later_export_carries_on_from_the_newest_day(log: Log, tmp_path: Path) -> None:
    out = tmp_path / "audit"
    first = export(log.store, open_target(str(out)), OPTIONS, until=date(2026, 3, 1))
    assert first.days == ["2026-03-01"]
    day_one = {k: v for k, v in files(out).items() if "2026-03-01" in k}
    later = run(log.store, out)  # no --since: from the newest day held
    assert later.since == "2026-03-01" and later.days == ["2026-03-01", "2026-03-02"]
    assert {k: v for k, v in files(out).items() if "2026-03-01" in k} == day_one
    run(log.store, tmp_path / "fresh")
    assert files(out) == files(tmp_path / "fresh")


def test_a_day_that_changed_is_written_again(log: Log, tmp_path: Path) -> None:
    out = tmp_path / "audit"
    run(log.store, out)
    log.store.delete_conversation(log.second)
    again = run(log.store, out, since=date(2026, 3, 1))
    assert again.removed + again.written > 0
    run(log.store, tmp_path / "fresh")
    assert files(out) == files(tmp_path / "fresh")


_SLOW_EXPORT = """
import sys, time
from datetime import date
from threadline.audit import ExportOptions, Pricing, export, open_target
from threadline.cache.pricing import profile
from threadline.stores.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[1])
export(store, open_target(sys.argv[2]), ExportOptions(Pricing(profile("anthropic-5m"), 3.0),
       rows_per_file=1), until=date(2026, 3, 2), after_file=lambda path: time.sleep(0.2))
"""


def test_a_killed_export_resumes_without_duplicates(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "threadline.db")
    build_log(store)
    out = tmp_path / "killed"
    src = str(Path(__file__).resolve().parents[2] / "src")
    child = subprocess.Popen([sys.executable, "-c", _SLOW_EXPORT, store.path, str(out)],
                             env={**os.environ, "PYTHONPATH": src})
    listed: list[object] = []
    deadline = time.monotonic() + 60
    while len(listed) < 3 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
        with contextlib.suppress(OSError, ValueError):  # not written yet, or mid-write
            listed = json.loads((out / "manifest.json").read_text())["files"]
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=10) == -signal.SIGKILL, "the export ended before it was killed"
    assert len(listed) >= 3
    small = ExportOptions(OPTIONS.pricing, rows_per_file=1)
    resumed = run(store, out, small, since=date(2026, 3, 1))
    assert resumed.unchanged >= 3
    run(store, tmp_path / "whole", small)
    assert files(out) == files(tmp_path / "whole")
    total, distinct = duckdb.connect().execute(
        f"SELECT count(*), count(DISTINCT call_id) FROM {query(out, 'calls')}").fetchone()
    assert total == distinct == resumed.rows["calls"]
    store.close()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_cycle_collector_is_left_as_it_was(log: Log, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               enabled: bool) -> None:
    """Paused while a day's rows are built, and as it was after, even when the export fails."""
    import gc
    seen: list[bool] = []
    module = importlib.import_module("threadline.audit.export")  # the package names export so
    built = module.day_tables

    def watched(*args: object) -> Iterator[object]:
        for table in built(*args):  # as each table is built
            seen.append(gc.isenabled())
            yield table

    monkeypatch.setattr(module, "day_tables", watched)
    (gc.enable if enabled else gc.disable)()
    try:
        run(log.store, tmp_path / "a")
        assert seen and not any(seen) and gc.isenabled() is enabled
        monkeypatch.setattr(module, "day_tables", lambda *_: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            run(log.store, tmp_path / "b")
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
