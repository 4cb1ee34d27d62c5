"""``verify``: an export that matches passes; a changed, missing or extra file, a manifest
that lies, an unfinished export and a log changed under it are each named."""

from __future__ import annotations

import json
import sqlite3
from datetime import date
from pathlib import Path

import pytest

from threadline.audit import ExportOptions, Pricing, export, open_target, verify
from threadline.cache.pricing import profile
from threadline.stores.sqlite import SQLiteStore

from .conftest import Log, build_log

OPTIONS = ExportOptions(Pricing(profile("anthropic-5m"), 3.0), rows_per_file=3)


def exported(log: Log, out: Path) -> Path:
    export(log.store, open_target(str(out)), OPTIONS, until=date(2026, 3, 2))
    return out


def first_file(out: Path, table: str) -> Path:
    return sorted((out / table).rglob("*.parquet"))[0]


@pytest.fixture
def sqlite_log(tmp_path: Path) -> Log:
    return build_log(SQLiteStore(tmp_path / "threadline.db"))


def test_an_intact_export_verifies(log: Log, tmp_path: Path) -> None:
    out = exported(log, tmp_path / "audit")
    result = verify(open_target(str(out)), log.store)
    assert result.ok, result.findings
    assert result.conversations == 2 and result.files > 5 and result.rows > 0


def test_a_changed_file_is_named(sqlite_log: Log, tmp_path: Path) -> None:
    out = exported(sqlite_log, tmp_path / "audit")
    bad = first_file(out, "turns")
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    [finding] = verify(open_target(str(out)), sqlite_log.store).findings
    assert finding.where == str(bad.relative_to(out)) and "sha256" in finding.detail


def test_missing_extra_and_miscounted_files_are_named(sqlite_log: Log, tmp_path: Path) -> None:
    out = exported(sqlite_log, tmp_path / "audit")
    gone = first_file(out, "calls")
    gone.unlink()
    (out / "turns" / "date=2026-03-01" / "part-x.parquet").write_bytes(b"PAR1")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["days"]["2026-03-01"]["compactions"] += 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    found = {(f.where, f.detail.split(" ")[0]) for f in
             verify(open_target(str(out)), None).findings}
    assert (str(gone.relative_to(out)), "listed") in found
    assert ("turns/date=2026-03-01/part-x.parquet", "not") in found
    assert ("compactions/date=2026-03-01", "the") in found


def test_an_unfinished_export_is_reported(sqlite_log: Log, tmp_path: Path) -> None:
    def stop(path: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export(sqlite_log.store, open_target(str(tmp_path / "cut")), OPTIONS,
               until=date(2026, 3, 2), after_file=stop)
    [finding] = verify(open_target(str(tmp_path / "cut")), None).findings
    assert finding.where == "date=2026-03-01" and "did not finish" in finding.detail


def test_a_log_changed_after_the_export_is_named(sqlite_log: Log, tmp_path: Path) -> None:
    out = exported(sqlite_log, tmp_path / "audit")
    db = sqlite3.connect(sqlite_log.store.path)
    with db:
        db.execute("UPDATE items SET content = ? WHERE conversation_id = ? AND seq = 1",
                   (json.dumps({"text": "When is the Paris trip?"}), sqlite_log.first))
    db.close()
    store = SQLiteStore(sqlite_log.store.path)  # a fresh handle: nothing read before
    try:
        findings = verify(open_target(str(out)), store).findings
    finally:
        store.close()
    assert findings and all(f.where == f"log: conversation {sqlite_log.first}"
                            for f in findings)
    assert any("item 1" in f.detail and "hash does not match" in f.detail for f in findings)
