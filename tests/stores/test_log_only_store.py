"""A store that keeps the log but no memory, corpora or response records says so (``memory``,
``corpora`` and ``responses`` are None), and everything that needs them refuses it with an
InputError instead of skipping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from threadline.cli._common import Context
from threadline.engine import Engine
from threadline.errors import InputError
from threadline.memory import MemoryStore
from threadline.memory.writer import MemoryWriter, enqueue
from threadline.models.scripted import ScriptedModel
from threadline.retrieval.corpus import Corpus
from threadline.server.app import create_app
from threadline.settings import Settings
from threadline.stores.sqlite import SQLiteStore


class LogOnly:
    """The log of a SQLite store, without what it keeps beside it."""

    memory = None
    corpora = None
    responses = None

    def __init__(self, inner: SQLiteStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
def log_only(tmp_path: Path) -> Iterator[LogOnly]:
    inner = SQLiteStore(tmp_path / "t.db")
    yield LogOnly(inner)
    inner.close()


def test_memory_and_corpora_refuse_a_store_that_keeps_none(log_only: LogOnly) -> None:
    with pytest.raises(InputError, match="LogOnly keeps no memory"):
        MemoryStore(log_only)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="LogOnly keeps no corpora"):
        Corpus(log_only)  # type: ignore[arg-type]
    turn = Engine(log_only, ScriptedModel()).run_turn("I live in Oslo.")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="keeps no memory"):
        enqueue(log_only, turn.message, "ann")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="keeps no memory"):
        MemoryWriter(log_only, MemoryStore(log_only._inner))  # type: ignore[arg-type]


def test_the_cli_and_the_server_decide_by_what_the_store_keeps(log_only: LogOnly,
                                                                tmp_path: Path) -> None:
    context = Context(Settings(home=tmp_path), _store=log_only)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="keeps no memory"):
        context.memory()
    with pytest.raises(InputError, match="keeps no corpora"):
        context.corpora()
    engine = context.engine(ScriptedModel())
    assert engine.run_turn("Hello").reply.text  # turns run, without memory
    with pytest.raises(InputError, match="keeps no memory, so a turn cannot name a user"):
        engine.run_turn("I live in Oslo.", user_id="ann")  # refused, never skipped
    assert len(log_only.conversations()) == 1
    client = TestClient(create_app(Engine(log_only, ScriptedModel())))  # type: ignore[arg-type]
    assert client.get("/v1/users/ann/memory").status_code == 404  # no memory routes
    with_memory = TestClient(create_app(Engine(log_only._inner, ScriptedModel())))
    assert with_memory.get("/v1/users/ann/memory").json() == []
    refused = client.post("/v1/responses", json={"input": "Hello"})
    assert refused.status_code == 400
    assert "LogOnly keeps no response records" in refused.json()["error"]["message"]
    assert client.get("/v1/responses/resp_1").status_code == 400
    assert len(log_only.conversations()) == 1  # nothing written
