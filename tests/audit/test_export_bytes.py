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
        "b4f26c13b9b4fa0911af4d11be68f22209fcefff5c4e35c248884f5032ab7745",
    "calls/date=2026-03-02/part-000000000-000000006.parquet":
        "a1c5121a65e8562c426bfd4d0d9f7c37210927b016c47416178633a859feb65d",
    "compactions/date=2026-03-02/part-000000000-000000000.parquet":
        "4d36cbbc50796ba0a1befe729e96f1ef4c9f334772be50669c7905c78623b14f",
    "memory_writes/date=2026-03-01/part-000000000-000000002.parquet":
        "8f6331afdfaba6d19624548ccd3b2f58e9306f567b788bb102a8726ed4669d39",
    "memory_writes/date=2026-03-02/part-000000000-000000025.parquet":
        "cbacd8f2175a8ea1f9f5392b6faa0332dd72d98b922db69e37a23b80f1a35837",
    "requests/date=2026-03-01/part-000000000-000000003.parquet":
        "0a51a729a52f8d38efc7f9fc1b2f0f30203fafb84a136947809a5416d6947719",
    "requests/date=2026-03-02/part-000000000-000000006.parquet":
        "862c404d8faf49e98fe146c2888d647ccff0c072c67ee272657b677b70ccb8b0",
    "turns/date=2026-03-01/part-000000000-000000002.parquet":
        "c63dccf7e25ef0a5c22a5909396a3104a9f53673bfb477d076122c8fd68e7887",
    "turns/date=2026-03-02/part-000000000-000000006.parquet":
        "0e5fb65d2b11b77b84b06b07695825e88230269593deffa6874aac88ed7413c0",
}
PINNED_ROWS = {
    "calls/date=2026-03-01/part-000000000-000000003.parquet":
        "68ba7f5a7262819ee1aae25fdacca6bfc27261b617c9ce3638a10df0195a9665",
    "calls/date=2026-03-02/part-000000000-000000006.parquet":
        "f0978cbd16abe0eb183defd7d142bbe50c8763f6ca8a52a54b794a9ce27caf2f",
    "compactions/date=2026-03-02/part-000000000-000000000.parquet":
        "15ede78371c419ccf875d47ffb069ee65bccf56d6f97c44230ff894a2fd06aa0",
    "memory_writes/date=2026-03-01/part-000000000-000000002.parquet":
        "0c8802ce3143a8260437a7cade94a4464807d9cd4dcac1fd7182ee8c4a096605",
    "memory_writes/date=2026-03-02/part-000000000-000000025.parquet":
        "cc76d9b72567d5ac34b6961122cc93485f5be56ec7497cc8fe6b926205f49f50",
    "requests/date=2026-03-01/part-000000000-000000003.parquet":
        "5dc5e608a0b2f618c996b4861636b2792a7428c58844d59b70225422adeba65c",
    "requests/date=2026-03-02/part-000000000-000000006.parquet":
        "362c4db42be9aa7a8d48233022708db73f6c3a2f2875f43c1c34b9942de644d9",
    "turns/date=2026-03-01/part-000000000-000000002.parquet":
        "260619f71c26b50980cc25b01412e0e7b2cb1f465d3c272b97774570da1d1fd0",
    "turns/date=2026-03-02/part-000000000-000000006.parquet":
        "cc79079ade3eee228e95d2224a8a6b364ab8f7c93f7a6f1ecc0715fcfa6e56ed",
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
