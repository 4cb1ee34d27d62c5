"""The audit rows as tuples: each row holds its table's columns in order, and the files are
cut by request bytes where a table has them."""

from __future__ import annotations

import importlib
import io
from datetime import UTC, datetime, timedelta

import pytest

from threadline.audit.export import _activity, _jobs_by_conversation, day_start
from threadline.audit.rows import Entries, Pricing, day_rows, day_tables
from threadline.audit.tables import REQUESTS, TABLES, TURNS, arrow_table, parquet_bytes
from threadline.cache.pricing import profile, profiles

from .conftest import Log

pq = pytest.importorskip("pyarrow.parquet", reason="install the audit extra")
export_module = importlib.import_module("threadline.audit.export")


def test_each_row_holds_its_tables_columns_in_order(log: Log) -> None:
    audit = log.store.audit
    assert audit is not None
    days = _activity(audit, None, datetime(2026, 3, 2, tzinfo=UTC).date())
    seen = set()
    for day in days:
        start, end = day_start(day), day_start(day + timedelta(days=1))
        rows = day_rows(audit, start, end, Pricing(profile("anthropic-5m"), 3.0),
                        _jobs_by_conversation(log.store), Entries(log.store))
        for name, table_rows in rows.items():
            table = TABLES[name]
            for row in table_rows:
                assert isinstance(row, tuple) and len(row) == len(table.columns)
                seen.add(name)
            # what a file holds is each value under its own column
            data = parquet_bytes(arrow_table(table, table_rows, content=True))
            back = pq.read_table(io.BytesIO(data))
            assert back.column_names == table.names
            assert [tuple(r.values()) for r in back.to_pylist()] == table_rows
        for turn in rows["turns"]:
            assert turn[TURNS.names.index("conversation_id")] in (log.first, log.second)
    assert seen == set(TABLES)  # the fixture log has rows in every table


def test_an_empty_table_encodes() -> None:
    table = pq.read_table(io.BytesIO(parquet_bytes(arrow_table(TURNS, [], content=False))))
    assert table.num_rows == 0 and "query" not in table.column_names


def test_files_are_cut_by_request_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export_module, "BYTES_PER_FILE", 10)
    at = REQUESTS.names.index("request")
    rows = [("s", 6, "e", b"x" * 6)] * 5
    assert [(first, len(chunk)) for first, chunk in export_module._chunks(rows, 100, at)] == \
        [(0, 2), (2, 2), (4, 1)]
    # a table without request bytes is cut by count alone
    assert [(first, len(chunk)) for first, chunk in export_module._chunks(rows, 2)] == \
        [(0, 2), (2, 2), (4, 1)]


@pytest.mark.parametrize("name", sorted(profiles()))
def test_a_cost_is_the_bills_to_the_last_bit(name: str) -> None:
    priced = profile(name)
    for tokens in (0, 1, 1023, 1024, 2048, 4095, 150_000, 200_001):
        for reusable in (0, 1, tokens // 2, tokens, tokens + 7):
            assert priced.cost(tokens, reusable, 3.0) == \
                priced.bill(tokens, reusable, 3.0).cost_usd


def test_calls_and_requests_come_whole_before_any_item_is_read(log: Log) -> None:
    """What lets an export encode those two files while it reads and builds the rest."""
    audit = log.store.audit
    assert audit is not None
    events: list[str] = []

    class Watched:
        def calls(self, *args: object) -> object:
            events.append("read calls")
            return audit.calls(*args)  # type: ignore[arg-type]

        def conversations(self, *args: object) -> object:
            events.append("read items")
            return audit.conversations(*args)  # type: ignore[arg-type]

    day, active = min(_activity(audit, None, datetime(2026, 3, 2, tzinfo=UTC).date()).items())
    start, end = day_start(day), day_start(day + timedelta(days=1))
    pricing = Pricing(profile("anthropic-5m"), 3.0)
    for name, _rows in day_tables(Watched(), start, end, pricing,  # type: ignore[arg-type]
                                  _jobs_by_conversation(log.store), Entries(log.store), active):
        events.append(name)
    assert events == ["read calls", "calls", "requests", "read items", "turns", "compactions",
                      "memory_writes"]
    whole = day_rows(audit, start, end, pricing, _jobs_by_conversation(log.store),
                     Entries(log.store))
    assert whole["calls"] and whole["requests"] and whole["turns"]
