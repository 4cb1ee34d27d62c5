from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from threadline.engine import Engine
from threadline.models.scripted import ScriptedModel
from threadline.stores.sqlite import SQLiteStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "threadline.db")
    yield store
    store.close()


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
def engine(store: SQLiteStore, model: ScriptedModel) -> Engine:
    return Engine(store, model)
