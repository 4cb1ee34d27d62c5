from __future__ import annotations

import os
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


def require_llama_cpp() -> None:
    """Skip without llama-cpp-python, except where the suite promises the real model runs
    (scripts/test sets THREADLINE_REQUIRE_LOCAL_MODEL=1): there, its absence is a failure."""
    if os.environ.get("THREADLINE_REQUIRE_LOCAL_MODEL") == "1":
        import llama_cpp  # noqa: F401
    else:
        pytest.importorskip("llama_cpp", reason="install the local extra: scripts/bootstrap")
