"""The inspector's view tests: each drives the app in process over its own fixture store
(tests/inspector/_views_app.py), not the copied store of the pages' tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.inspector._views_app import World, build_world, client
from threadline.stores.sqlite import SQLiteStore


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    store = SQLiteStore(tmp_path / "threadline.db")
    try:
        yield build_world(store)
    finally:
        store.close()


@pytest.fixture
def ui(world: World) -> TestClient:
    return client(world)
