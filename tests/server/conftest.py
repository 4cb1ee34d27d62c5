"""The service runs on either store: every server test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from threadline.stores.base import Store
from threadline.stores.sqlite import SQLiteStore


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Opens another handle on this test's database, as another replica would; each is
    closed at the end of the test."""
    opened: list[Store] = []
    if request.param == "sqlite":
        def open_one() -> Store:
            return SQLiteStore(tmp_path / "threadline.db")
    else:
        url = request.getfixturevalue("postgres_url")
        from threadline.stores.postgres import PostgresStore

        def open_one() -> Store:
            return PostgresStore(url, max_connections=4)

    def tracked() -> Store:
        opened.append(open_one())
        return opened[-1]

    yield tracked
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: Callable[[], Store]) -> Store:
    return make_store()
