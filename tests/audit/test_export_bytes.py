"""The export, pinned: a log built with fixed ids and timings exports to files whose rows and
bytes are written down here, on SQLite and on PostgreSQL alike. A change to how the log is read
or the rows are built that moves a single value fails this test, so a faster reader is checked
to write exactly what the one before it wrote. A change that means to move what the log
records (a prefix report's cause, say) moves the pins of the files it reaches: check that only
those moved, then write the new digests in.

The bytes depend on the pyarrow that wrote them too (each file names its writer's version), so
they are compared under the version they were pinned with; the rows, read back, always are."""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from threadline.audit import ExportOptions, Pricing, export, open_target
from threadline.cache.pricing import profile
from threadline.stores.base import Store

from .conftest import build_log

pa = pytest.importorskip("pyarrow", reason="install the audit extra")
pq = pytest.importorskip("pyarrow.parquet", reason="install the audit extra")

# sha256 of each file of the export of ``build_log`` with the ids and timings below, as
# pyarrow PINNED_WITH wrote them, and of each file's schema and rows (``_rows_digest``)
PINNED_WITH = "26.0.1"
PINNED_BYTES = {
    "calls/date=2026-03-01/part-000000000-000000003.parquet":
        "5bf96e98a1c517b76bc327aab35d40885c2b1414dfa95178c9f9cee8b16754a8",
    "calls/date=2026-03-02/part-000000000-000000006.parquet":
        "e0ed818b7d7c7ade1ea2abab0afb75b6381005774d93273f6b4bf636eba021ce",
    "compactions/date=2026-03-02/part-000000000-000000000.parquet":
        "c81d028d90b08c22fc03864550b1576c229553f1c98d7e0e7af8ffaa573eb9c0",
    "memory_writes/date=2026-03-01/part-000000000-000000000.parquet":
        "76110ae0e9ec028a26f75601015c6916bdbede144547633ae053e749a1796d9b",
    "memory_writes/date=2026-03-02/part-000000000-000000024.parquet":
        "7a7ad6835c5183c3478813d2522308304d7e09d8915acc0e0a0c620fbd8d23e8",
    "requests/date=2026-03-01/part-000000000-000000003.parquet":
        "c4e87312ba6aff523f851c7602c561d6e1cce23e52030ca451b7acff9ce75643",
    "requests/date=2026-03-02/part-000000000-000000006.parquet":
        "cb73c610431633e0fdfa973b298f34bed1b925c0137a498fa21011bb8c0b7226",
    "turns/date=2026-03-01/part-000000000-000000002.parquet":
        "7d4d7e3a41735407d790148032c58b3066b290852ee927fbe4c2547e1705268c",
    "turns/date=2026-03-02/part-000000000-000000006.parquet":
        "e73487c74a0846bacebda004c7c2687628f791e0c14b6d08525a58ffcde61e8b",
}
PINNED_ROWS = {
    "calls/date=2026-03-01/part-000000000-000000003.parquet":
        "7839aaa0081db8581323d4297d285ef116776621f8f2bbf04e5a25c87aabe3e1",
    "calls/date=2026-03-02/part-000000000-000000006.parquet":
        "cb726dc7d77c74fa6aa63fd30949dea38f6473054085656edd1658158a413252",
    "compactions/date=2026-03-02/part-000000000-000000000.parquet":
        "beee865ead82d082049a21dedbfa9cd2a92f0a8c9dcc3dbcb045c677ecffecfa",
    "memory_writes/date=2026-03-01/part-000000000-000000000.parquet":
        "6d6ddd1bed1db9670f7651ed99156603e455ff83cc5aa689a72186c36a035d1d",
    "memory_writes/date=2026-03-02/part-000000000-000000024.parquet":
        "e00d6b00ef73b90b83bee59f3c2d25f31c5ceeb35cab5b580db8b39289ba36dd",
    "requests/date=2026-03-01/part-000000000-000000003.parquet":
        "424f962dab377e7f018335c261abc3410000dda69757379161f8aa2f90565ad2",
    "requests/date=2026-03-02/part-000000000-000000006.parquet":
        "056303e2f6e62103c980ef7b4f6ed9493f37839719b834cdfca245dfb4c1a0a8",
    "turns/date=2026-03-01/part-000000000-000000002.parquet":
        "ceafb143c75225e872a05d80037def76ada7981666bedff178dacfcc4d07263f",
    "turns/date=2026-03-02/part-000000000-000000006.parquet":
        "91218a51a7d85a6d058627123f504a67f541be156409df3ac7074b9597e0b48b",
}


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids from a counter, and stopwatches (the model call's, the query rewrite's) that tick
    3 ms a reading, so the log is the same on every run (the clock is ``build_log``'s)."""
    counter = itertools.count(1)

    def new_id(prefix: str) -> str:
        return f"{prefix}{next(counter):026d}"

    for module in ("threadline.turn.ingest", "threadline.models.calling",
                   "threadline.models.scripted", "threadline.memory.store"):
        monkeypatch.setattr(f"{module}.new_id", new_id)
    for module in ("threadline.models.base", "threadline.rewrite.race"):
        ticks = itertools.count(0, 0.003)
        monkeypatch.setattr(importlib.import_module(module), "time", SimpleNamespace(
            perf_counter=lambda ticks=ticks: next(ticks)))


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, fixed: None) -> Iterator[Store]:
    if request.param == "sqlite":
        from threadline.stores.sqlite import SQLiteStore
        built: Store = SQLiteStore(tmp_path / "threadline.db")
    else:
        from threadline.stores.postgres import PostgresStore
        built = PostgresStore(request.getfixturevalue("postgres_url"))
    try:
        build_log(built)
        yield built
    finally:
        built.close()


@pytest.mark.parametrize("per_read", [None, 1])
def test_the_export_is_byte_for_byte_the_pinned_one(store: Store, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   per_read: int | None) -> None:
    if per_read is not None:  # each conversation a batch of its own: the same files
        monkeypatch.setattr("threadline.audit.rows.CONVERSATIONS_PER_READ", per_read)
    out = tmp_path / "audit"
    export(store, open_target(str(out)), ExportOptions(Pricing(profile("anthropic-5m"), 3.0)),
           until=date(2026, 3, 2))
    paths = sorted(out.rglob("*.parquet"))
    assert {str(p.relative_to(out)): _rows_digest(p) for p in paths} == PINNED_ROWS
    if pa.__version__ == PINNED_WITH:
        assert {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in paths} == PINNED_BYTES


def _rows_digest(path: Path) -> str:
    """sha256 of the file's schema and rows as pyarrow reads them back, in order."""
    table = pq.read_table(path)
    text = json.dumps([str(table.schema), table.to_pylist()], default=_plain, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"no plain form for {type(value).__name__}")
