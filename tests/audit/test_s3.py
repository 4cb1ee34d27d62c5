"""The export to object storage, against moto's S3-compatible server in its own process
(tests/audit/conftest.py): the same bytes as a local export, a resume after an interruption,
verify over S3, and DuckDB over the files read back through pyarrow."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from threadline.audit import ExportOptions, Pricing, export, open_target, verify
from threadline.audit.target import S3Options, s3_filesystem
from threadline.cache.pricing import profile
from threadline.stores.sqlite import SQLiteStore

from .conftest import Log, S3Server, build_log

duckdb = pytest.importorskip("duckdb", reason="install the audit-test extra")

OPTIONS = ExportOptions(Pricing(profile("anthropic-5m"), 3.0), rows_per_file=4)
UNTIL = date(2026, 3, 2)


@pytest.fixture
def sqlite_log(tmp_path: Path) -> Log:
    return build_log(SQLiteStore(tmp_path / "threadline.db"))


def _objects(server: S3Server, prefix: str) -> dict[str, bytes]:
    target = open_target(f"s3://{server.bucket}/{prefix}")
    return {path: target.read(path) or b"" for path in target.files()}


def test_an_s3_export_is_the_local_export(sqlite_log: Log, s3_env: S3Server,
                                          tmp_path: Path) -> None:
    remote = open_target(f"s3://{s3_env.bucket}/run1")
    export(sqlite_log.store, remote, OPTIONS, until=UNTIL)
    export(sqlite_log.store, open_target(str(tmp_path / "local")), OPTIONS, until=UNTIL)
    local = {str(p.relative_to(tmp_path / "local")): p.read_bytes()
             for p in sorted((tmp_path / "local").rglob("*")) if p.is_file()}
    assert _objects(s3_env, "run1") == local
    result = verify(remote, sqlite_log.store)
    assert result.ok and result.files == len(local) - 1
    calls = ds.dataset(f"{s3_env.bucket}/run1/calls", filesystem=s3_filesystem(S3Options()),
                       format="parquet", partitioning="hive")
    db = duckdb.connect()
    db.register("calls", calls)
    by_day = dict(db.execute("SELECT date, count(*) FROM calls GROUP BY date ORDER BY date"
                         ).fetchall())
    assert set(by_day) == {"2026-03-01", "2026-03-02"}
    assert sum(by_day.values()) == sum(len(sqlite_log.store.calls(c))
                                       for c in (sqlite_log.first, sqlite_log.second))


class Stop(Exception):
    pass


def test_an_interrupted_s3_export_resumes(sqlite_log: Log, s3_env: S3Server) -> None:
    remote = open_target(f"s3://{s3_env.bucket}/run2")
    seen: list[str] = []

    def stop(path: str) -> None:
        seen.append(path)
        if len(seen) == 2:
            raise Stop

    with pytest.raises(Stop):
        export(sqlite_log.store, remote, OPTIONS, until=UNTIL, after_file=stop)
    assert not verify(remote, None).ok
    resumed = export(sqlite_log.store, remote, OPTIONS, until=UNTIL, since=date(2026, 3, 1))
    assert resumed.unchanged == 2
    export(sqlite_log.store, open_target(f"s3://{s3_env.bucket}/run3"), OPTIONS, until=UNTIL)
    assert _objects(s3_env, "run2") == _objects(s3_env, "run3")
    assert verify(remote, sqlite_log.store).ok


def test_the_endpoint_option_overrides_the_environment(sqlite_log: Log, s3_env: S3Server,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    target = open_target(f"s3://{s3_env.bucket}/run4", S3Options(endpoint_url=s3_env.endpoint))
    assert export(sqlite_log.store, target, OPTIONS, until=UNTIL).written > 0
