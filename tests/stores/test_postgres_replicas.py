"""Two engines over one PostgreSQL database behave as one: what replicas of the HTTP service
rely on. Each engine has its own store handle (its own connection pool), as separate
processes would."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from threadline.engine import Engine
from threadline.items import ItemKind, utc_now
from threadline.models.scripted import ScriptedModel
from threadline.stores.base import Generation
from threadline.stores.postgres import PostgresStore
from threadline.stores.verify import verify_conversation


@pytest.fixture
def replicas(postgres_url: str) -> Iterator[tuple[Engine, Engine]]:
    stores = [PostgresStore(postgres_url, max_connections=6) for _ in range(2)]
    try:
        yield (Engine(stores[0], ScriptedModel(token_delay_s=0.001)),
               Engine(stores[1], ScriptedModel(token_delay_s=0.001)))
    finally:
        for store in stores:
            store.close()


def test_concurrent_senders_on_two_replicas_never_fork_or_lose_a_turn(
        replicas: tuple[Engine, Engine]) -> None:
    a, b = replicas
    cid = a.run_turn("start").conversation_id
    senders, per_sender = 6, 3
    errors: list[BaseException] = []

    def send(n: int) -> None:
        try:
            for k in range(per_sender):
                (a if (n + k) % 2 else b).run_turn(f"s{n}-{k}", conversation_id=cid)
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=send, args=(n,)) for n in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    history = b.store.history(cid)
    kinds = [i.kind for i in history]
    # every message answered before the next one arrived: strictly alternating, none lost
    assert kinds == [ItemKind.USER, ItemKind.ASSISTANT] * (1 + senders * per_sender)
    assert sorted(i.text for i in history if i.kind is ItemKind.USER)[:-1] == sorted(
        f"s{n}-{k}" for n in range(senders) for k in range(per_sender))
    assert [br.name for br in a.store.branches(cid)] == ["main"]
    assert verify_conversation(a.store, cid) == []


def test_a_retry_through_the_other_replica_returns_the_first_answer(
        replicas: tuple[Engine, Engine]) -> None:
    a, b = replicas
    cid = a.run_turn("start").conversation_id
    first = a.run_turn("book it", conversation_id=cid, client_msg_id="m-42")
    again = b.run_turn("book it", conversation_id=cid, client_msg_id="m-42")
    assert again.deduplicated and again.reply.seq == first.reply.seq
    assert len(b.store.history(cid)) == 4


def test_a_generation_streamed_by_one_replica_reads_back_from_the_other(
        replicas: tuple[Engine, Engine]) -> None:
    a, b = replicas
    cid = a.run_turn("start").conversation_id
    a.store.save_generation(Generation("gen_x", cid, "Hel"), utc_now())
    assert b.store.generation("gen_x") == Generation("gen_x", cid, "Hel")
