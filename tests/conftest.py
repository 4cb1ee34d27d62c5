from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from threadline.engine import Engine
from threadline.models.llama_server import LlamaServer
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


def require_llama_server() -> None:
    """Skip without llama.cpp's llama-server (the anthropic-server extra), except where the
    suite promises the real model runs (THREADLINE_REQUIRE_LOCAL_MODEL=1): there, its absence
    is a failure."""
    from threadline.errors import ModelUnavailable
    from threadline.models.llama_server import binary_path

    try:
        binary_path()
    except ModelUnavailable:
        if os.environ.get("THREADLINE_REQUIRE_LOCAL_MODEL") == "1":
            raise
        pytest.skip("install the anthropic-server extra: scripts/bootstrap anthropic-server")


ANTHROPIC_TEST_KEY = "threadline-test-key"


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama.cpp's own server with the SmolLM2 GGUF, serving Anthropic's Messages API on a free
    port of 127.0.0.1 for the whole session (two threads, one 4,096-token slot, and an API key,
    so a wrong key is refused by the real server)."""
    require_llama_server()
    pytest.importorskip("anthropic", reason="install the anthropic extra")
    from threadline.models import llama_server as server

    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with server.start(threads=2, ctx=4096, api_key=ANTHROPIC_TEST_KEY, log=log) as running:
        yield running


TEST_DATABASE_URL = os.environ.get("THREADLINE_TEST_DATABASE_URL",
                                   "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def empty_postgres_url() -> Iterator[str]:
    """A connection string to an empty schema of its own on the test server, dropped
    afterwards. Skips without a server, except where the suite promises PostgreSQL runs
    (scripts/test sets THREADLINE_REQUIRE_POSTGRES=1): there, its absence is a failure."""
    psycopg = pytest.importorskip("psycopg", reason="install the postgres extra")
    try:
        admin = psycopg.connect(TEST_DATABASE_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError:
        if os.environ.get("THREADLINE_REQUIRE_POSTGRES") == "1":
            raise
        pytest.skip(f"no PostgreSQL at {TEST_DATABASE_URL}")
    name = f"t_{os.urandom(6).hex()}"
    with admin:
        admin.execute(f"CREATE SCHEMA {name}")
        try:
            yield f"{TEST_DATABASE_URL}?options=-csearch_path%3D{name}"
        finally:
            admin.execute(f"DROP SCHEMA {name} CASCADE")


@pytest.fixture
def postgres_url(empty_postgres_url: str) -> str:
    """:func:`empty_postgres_url`, migrated to the current schema."""
    from threadline.stores.postgres import migrate

    migrate(empty_postgres_url)
    return empty_postgres_url
