"""A log worth exporting, on SQLite and on PostgreSQL, and a real S3-compatible server.

The log spans two UTC days and has what every audit table records: turns that searched a
corpus and recalled memories, a failed call answered again, a regenerated reply on a fork, a
constraint and a compaction that pins it, and memory writes the writer decided.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from threadline.compaction.auto import Compaction
from threadline.compaction.constraints import add_constraint
from threadline.errors import ModelCallFailed
from threadline.memory import MemoryStore, NewMemory
from threadline.memory.writer import MemoryWriter
from threadline.models.scripted import ScriptedModel
from threadline.providers import CorpusSearch
from threadline.retrieval.corpus import Corpus, Document
from threadline.standard import standard_engine
from threadline.stores.base import Store

pytest.importorskip("pyarrow", reason="install the audit extra")

DAY_ONE = datetime(2026, 3, 1, 23, 58, tzinfo=UTC)  # the first conversation crosses midnight


class Clock:
    """A second per reading, from ``DAY_ONE``."""

    def __init__(self) -> None:
        self.now = DAY_ONE

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=7)
        return self.now


@dataclass(frozen=True)
class Log:
    store: Store
    first: str   # conversation ids
    second: str
    fork: str    # the regenerated reply's branch in the first


def build_log(store: Store) -> Log:
    clock = Clock()
    corpora = Corpus(store)
    corpora.add("notes", [Document("trip.md", "The Lisbon trip is booked for May. "
                                              "The hotel is near the river.")])
    MemoryStore(store, clock=clock).add("ann", NewMemory("I am flying to Lisbon in May"))
    model = ScriptedModel()
    engine = standard_engine(store, model, corpora=corpora, clock=clock)
    search = [CorpusSearch("notes")]
    first = engine.run_turn("When is the Lisbon trip?", user_id="ann", options=search)
    cid = first.conversation_id
    engine.run_turn("I live in Oslo. Where is the hotel?", conversation_id=cid,
                    user_id="ann", options=search)
    add_constraint(store, cid, "Always answer in one sentence.", clock=clock)
    model.enqueue(RuntimeError("backend down"))
    with pytest.raises(ModelCallFailed):
        engine.run_turn("And how do I get there?", conversation_id=cid, user_id="ann")
    engine.answer(cid)
    for n in range(3):
        engine.run_turn(f"Tell me more about day {n} of the trip. " * 8, conversation_id=cid,
                        user_id="ann")
    done = Compaction().compact(engine, cid, budget=200)
    assert done.applied is not None
    engine.run_turn("What was the plan again?", conversation_id=cid, user_id="ann")
    message = next(i for i in store.history(cid) if i.kind.value == "user_message")
    fork = engine.regenerate(cid, message.seq).branch
    second = engine.run_turn("A new conversation on the second day.").conversation_id
    engine.run_turn("I am vegetarian.", conversation_id=second, user_id="bob")
    MemoryWriter(store, MemoryStore(store, clock=clock)).run()
    return Log(store, cid, second, fork)


@pytest.fixture(params=["sqlite", "postgres"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Log]:
    if request.param == "sqlite":
        from threadline.stores.sqlite import SQLiteStore
        store: Store = SQLiteStore(tmp_path / "threadline.db")
    else:
        from threadline.stores.postgres import PostgresStore
        store = PostgresStore(request.getfixturevalue("postgres_url"))
    try:
        yield build_log(store)
    finally:
        store.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's standalone S3-compatible server (the audit-test extra), in its own process on a
    free port of 127.0.0.1, with one bucket."""
    pytest.importorskip("moto.server", reason="install the audit-test extra")
    port = _free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                               str(port)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.1)
        import boto3
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                     aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket="audit")
        yield S3Server(endpoint, "audit")
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The standard AWS_* variables pointing at the local server."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    return s3_server
