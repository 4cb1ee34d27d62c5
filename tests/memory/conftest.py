"""Fixtures for the memory tests: a store on each backend, a memory over it, a test clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from threadline.memory import MemoryStore
from threadline.stores.relational import RelationalStore
from threadline.stores.sqlite import SQLiteStore

T0 = datetime(2026, 5, 3, 9, 30, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=["sqlite", "postgres"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RelationalStore]:
    if request.param == "sqlite":
        store: RelationalStore = SQLiteStore(tmp_path / "t.db")
    else:
        from threadline.stores.postgres import PostgresStore

        store = PostgresStore(request.getfixturevalue("postgres_url"))
    yield store
    store.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def memory(log: RelationalStore, clock: Clock) -> MemoryStore:
    return MemoryStore(log, clock=clock)
