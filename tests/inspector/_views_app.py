"""The call, memory and stats pages served as the inspector will serve them, and a log worth
looking at.

``views_app`` is the service (``create_app``) with the pages' router included, the
inspector's static files at ``/ui/static`` and a stand-in for the conversations page at
``/ui`` that the layout links to. ``build_world`` writes, through the engine, a log with what
the pages show: Ann's conversation with turns that searched a corpus and recalled memory, a
standing constraint, a compaction that pins it, a regenerated reply on a fork; Bob's
conversation; memory with provenance, a correction (so a revision), an untrusted entry with
validity times, and Zed, whose turns were learned from and who has a job still queued.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from threadline.compaction.auto import Compaction
from threadline.compaction.constraints import add_constraint
from threadline.engine import Engine
from threadline.inspector.app import mount
from threadline.items import ItemKind, new_id
from threadline.memory import MemoryKind, MemoryStore, NewMemory, Source
from threadline.memory.recall import MemoryRecall
from threadline.memory.writer import MemoryWriter
from threadline.models.base import Completion
from threadline.models.scripted import ScriptedModel
from threadline.providers import CorpusSearch
from threadline.request import Request
from threadline.retrieval.corpus import Corpus, Document
from threadline.server.app import create_app
from threadline.standard import standard_engine
from threadline.stores.base import Commit, NewConversation, Store
from threadline.stores.tokens import TokenRole, issue

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SAME_ORIGIN = {"Origin": "http://testserver"}
SYSTEM = "You are a travel assistant."


class MessagesOnly(ScriptedModel):
    """The scripted model, recording its requests as an HTTP backend does: the messages
    only, so the exact bytes are the canonical JSON payload."""

    def complete(self, request: Request, **kwargs: Any) -> Completion:
        done = super().complete(request, **kwargs)
        return replace(done, sent=replace(done.sent, rendering=None))


class Clock:
    """Seven seconds per reading, from ``T0``: entries and calls in a known order."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=7)
        return self.now


def views_app(engine: Engine, *, require_tokens: bool = False) -> FastAPI:
    app = create_app(engine, require_tokens=require_tokens)
    mount(app, engine)
    return app


@dataclass
class World:
    store: Store
    engine: Engine
    clock: Clock
    ann_cid: str
    bob_cid: str
    fork: str          # the regenerated reply's branch in Ann's conversation
    ann_entry: str     # stated in Ann's conversation (provenance: its first message)
    ann_edited: str    # the current version of an entry Ann corrected
    ann_original: str  # the version it replaced
    ann_inferred: str  # untrusted, with validity times
    bob_entry: str

    def calls(self, cid: str | None = None) -> list[Any]:
        return self.store.calls(cid or self.ann_cid)

    def call_with(self, cause: str) -> Any:
        return next(c for c in self.calls() if c.prefix and c.prefix["cause"] == cause)


def _conversation(store: Store, clock: Clock, owner: str | None) -> str:
    cid = new_id("c_")
    store.commit(Commit(conversation_id=cid, created_at=clock(), expected_head=None,
                        create=NewConversation(cid, system=SYSTEM, owner=owner)))
    return cid


def build_world(store: Store) -> World:
    clock = Clock()
    corpora = Corpus(store)
    corpora.add("notes", [Document("trip.md", "The Lisbon trip is booked for May. "
                                              "The hotel is near the river."),
                          Document("food.md", "Dinner on the first night is at a fish "
                                              "restaurant in Alfama.")])
    memory = MemoryStore(store, clock=clock)
    model = ScriptedModel()
    engine = standard_engine(store, model, corpora=corpora, clock=clock,
                             system=SYSTEM,
                             recall=MemoryRecall(memory))
    search = (CorpusSearch("notes"),)
    ann = _conversation(store, clock, "ann")
    engine.run_turn("When is the Lisbon trip?", conversation_id=ann, user_id="ann",
                    options=search)
    engine.run_turn("And the hotel?", conversation_id=ann, user_id="ann", options=search)
    add_constraint(store, ann, "Always answer in one sentence.", clock=clock)
    for n in range(3):
        engine.run_turn(f"Tell me more about day {n} of the trip. " * 8, conversation_id=ann)
    assert Compaction().compact(engine, ann, budget=200).applied is not None
    engine.run_turn("What was the plan again?", conversation_id=ann)
    first = next(i for i in store.history(ann) if i.kind is ItemKind.USER)
    fork = engine.regenerate(ann, first.seq).branch

    stated = memory.add("ann", NewMemory("Ann is flying to Lisbon in May", conversation_id=ann,
                                         item_seqs=(first.seq,)))
    original = memory.add("ann", NewMemory("Ann's hotel is the Tejo Palace"))
    edited = memory.correct("ann", original.id, "Ann's hotel is the Rio Azul")
    inferred = memory.add("ann", NewMemory(
        "Ann likes fish restaurants", MemoryKind.FACT, Source.MODEL_INFERRED,
        valid_from=T0, valid_to=T0 + timedelta(days=365)))

    bob = _conversation(store, clock, "bob")
    engine.run_turn("I am vegetarian.", conversation_id=bob, user_id="bob")
    bob_entry = memory.add("bob", NewMemory("Bob is vegetarian", conversation_id=bob,
                                            item_seqs=(1,)))
    # Zed: what the forget test looks for in every table (no one owns his conversation)
    memory.add("zed-7f3a", NewMemory("zed-7f3a's passport number is P123"))
    zed = engine.run_turn("I live in Oslo.", user_id="zed-7f3a")
    MemoryWriter(store, memory).run()
    engine.run_turn("Where do I live? I work at the harbour office.", user_id="zed-7f3a",
                    conversation_id=zed.conversation_id)
    return World(store, engine, clock, ann, bob, fork, stated.id, edited.id, original.id,
                 inferred.id, bob_entry.id)


def tokens(store: Store) -> dict[str, str]:
    """Bearer headers for an admin, Ann and Bob (tokens are required from now on)."""
    backend = store.tokens
    assert backend is not None
    out = {}
    for name, user in (("admin", None), ("ann", "ann"), ("bob", "bob")):
        role = TokenRole.ADMIN if user is None else TokenRole.USER
        secret = issue(backend, role=role, user_id=user, name=None, at=T0)[1]
        out[name] = f"Bearer {secret}"
    return out


def client(world: World, **kwargs: Any) -> TestClient:
    return TestClient(views_app(world.engine, **kwargs))


def table_rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of a SQLite file, sorted, by table."""
    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {name: sorted(conn.execute(f"SELECT * FROM {name}").fetchall(),  # noqa: S608
                             key=repr) for name in names}
    finally:
        conn.close()
