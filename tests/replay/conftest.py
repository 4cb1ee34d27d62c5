"""Store handles for the replay tests, on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from threadline.stores.base import Store
from threadline.stores.sqlite import SQLiteStore

MakeStore = Callable[[], Store]


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> MakeStore:
    """Handles on one store, SQLite or PostgreSQL: replay reads through a fresh one, as a
    later process would, so nothing comes from the recording handle's memory."""
    if request.param == "sqlite":
        return lambda: SQLiteStore(tmp_path / "replay.db")
    url = request.getfixturevalue("postgres_url")
    from threadline.stores.postgres import PostgresStore

    return lambda: PostgresStore(url, max_connections=2)


@pytest.fixture
def recorded(make_store: MakeStore) -> Iterator[tuple[Store, str]]:
    """The fixture log (``tests/replay/log.py``), read back through a fresh handle."""
    from tests.replay.log import record

    store = make_store()
    try:
        cid = record(store)
    finally:
        store.close()
    fresh = make_store()
    yield fresh, cid
    fresh.close()


@pytest.fixture
def recorded_sqlite(tmp_path: Path) -> Iterator[tuple[Store, str]]:
    """The fixture log on SQLite only: for what does not depend on the store."""
    from tests.replay.log import record

    store = SQLiteStore(tmp_path / "replay.db")
    try:
        cid = record(store)
    finally:
        store.close()
    fresh = SQLiteStore(tmp_path / "replay.db")
    yield fresh, cid
    fresh.close()
