"""One turn at a time per conversation, across engines on the same file (as two replicas
would be), with the sender's choice of what a second message does meanwhile."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from threadline.calls import CallStatus
from threadline.engine import Engine
from threadline.errors import TurnCancelled, TurnInProgress
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.stores.base import Lease
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.lease import Holding, LeasePolicy

SLOW_REPLY = " ".join(f"word{n}" for n in range(40))


def _replica(path: Path, **lease: float | str) -> tuple[Engine, SQLiteStore, ScriptedModel]:
    store = SQLiteStore(path)
    model = ScriptedModel(token_delay_s=0.02)
    return Engine(store, model, lease=LeasePolicy(**lease)), store, model  # type: ignore[arg-type]


def _start_slow_turn(engine: Engine, model: ScriptedModel, cid: str
                     ) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    streaming, errors = threading.Event(), []
    model.enqueue(SLOW_REPLY)

    def run() -> None:
        try:
            engine.run_turn("first question", conversation_id=cid,
                            on_text=lambda _: streaming.set())
        except BaseException as err:  # noqa: BLE001 - inspected by the test
            errors.append(err)

    thread = threading.Thread(target=run)
    thread.start()
    assert streaming.wait(5)
    return thread, streaming, errors


def test_a_second_message_queues_behind_the_running_turn(tmp_path: Path) -> None:
    a, store, model_a = _replica(tmp_path / "t.db")
    b, _, _ = _replica(tmp_path / "t.db")
    cid = a.run_turn("hello").conversation_id
    thread, _, errors = _start_slow_turn(a, model_a, cid)
    second = b.run_turn("second question", conversation_id=cid)  # waits for the lease
    thread.join()
    assert errors == []
    texts = [(i.kind, i.text) for i in store.history(cid)][2:]
    assert [k for k, _ in texts] == [ItemKind.USER, ItemKind.ASSISTANT] * 2
    assert texts[0][1] == "first question" and texts[1][1] == SLOW_REPLY
    assert texts[2][1] == "second question" and second.turn == 3


def test_reject_refuses_at_once_and_writes_nothing(tmp_path: Path) -> None:
    a, store, model_a = _replica(tmp_path / "t.db")
    b, _, _ = _replica(tmp_path / "t.db")
    cid = a.run_turn("hello").conversation_id
    thread, _, errors = _start_slow_turn(a, model_a, cid)
    before = len(store.history(cid))
    with pytest.raises(TurnInProgress) as refused:
        b.run_turn("are you there?", conversation_id=cid, on_busy="reject")
    assert refused.value.retry_after_s >= 1
    assert len(store.history(cid)) == before
    thread.join()
    assert errors == [] and "are you there?" not in [i.text for i in store.history(cid)]


def test_cancel_stops_the_running_turn_and_answers_the_newer_message(tmp_path: Path) -> None:
    a, store, model_a = _replica(tmp_path / "t.db")
    b, _, _ = _replica(tmp_path / "t.db")
    cid = a.run_turn("book the flight").conversation_id
    thread, _, errors = _start_slow_turn(a, model_a, cid)
    result = b.run_turn("actually make it Tuesday", conversation_id=cid, on_busy="cancel")
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], TurnCancelled)
    calls = store.calls(cid)
    assert calls[-2].status is CallStatus.FAILED and "cancelled" in (calls[-2].error or "")
    texts = [i.text for i in store.history(cid)]
    assert texts[2:4] == ["first question", "actually make it Tuesday"]  # the first unanswered
    assert texts[-1] == result.reply.text
    seen = [m.content for m in b.model.requests[-1].messages]  # type: ignore[attr-defined]
    assert "first question" in seen  # answered with the interrupted message in view


def test_a_crashed_holder_never_wedges_a_conversation(tmp_path: Path) -> None:
    engine, store, _ = _replica(tmp_path / "t.db", ttl_s=0.5)
    cid = engine.run_turn("hello").conversation_id
    store.lease(cid, "lease_crashed", 0.5, time.time())  # taken, then the holder died
    started = time.monotonic()
    result = engine.run_turn("still there?", conversation_id=cid)
    assert result.turn == 2 and 0.3 < time.monotonic() - started < 5


def test_a_bad_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="busy policy"):
        LeasePolicy(on_busy="shove")


def test_the_heartbeat_keeps_the_lease_through_a_long_prefill(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    slow = ScriptedModel(first_token_delay_s=0.8)  # no token for longer than the lease lives
    a = Engine(store, slow, lease=LeasePolicy(ttl_s=0.3, heartbeat_s=0.1))
    b = Engine(SQLiteStore(tmp_path / "t.db"), ScriptedModel(),
               lease=LeasePolicy(ttl_s=0.3, heartbeat_s=0.1))
    cid = b.run_turn("hello").conversation_id
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _run(a, cid, errors))
    thread.start()
    time.sleep(0.2)
    second = b.run_turn("queued behind it", conversation_id=cid)
    thread.join()
    assert errors == []  # not cancelled: its lease never lapsed
    texts = [i.text for i in store.history(cid)]
    assert texts.index("long prefill") < texts.index("queued behind it")
    assert second.reply.text == texts[-1]


def _run(engine: Engine, cid: str, errors: list[BaseException]) -> None:
    try:
        engine.run_turn("long prefill", conversation_id=cid)
    except BaseException as err:  # noqa: BLE001 - inspected by the test
        errors.append(err)


class Counting(SQLiteStore):
    """A store that counts its write transactions."""

    writes = 0

    def _begin(self):  # type: ignore[no-untyped-def]
        self.writes += 1
        return super()._begin()


def test_a_turn_under_the_lease_is_two_durable_writes(tmp_path: Path) -> None:
    from threadline.providers.retrieval import CorpusSearch
    from threadline.retrieval.corpus import Corpus, Document
    from threadline.standard import standard_engine

    store = Counting(tmp_path / "t.db")
    corpora = Corpus(store)
    corpora.add("notes", [Document("trip.md", "The Lisbon trip is booked for May.")])
    engine = standard_engine(store, ScriptedModel(), corpora=corpora, recall=False,
                             lease=LeasePolicy(heartbeat_s=5.0, ttl_s=10.0))  # no renewal
    cid = engine.run_turn("hello").conversation_id
    store.writes = 0
    engine.run_turn("When is the Lisbon trip?", conversation_id=cid,
                    options=[CorpusSearch("notes")])
    # the message with its retrieval item and the lease; the reply with its call record and
    # the lease given back
    assert store.writes == 2
    assert store.lease_holder(cid, time.time()) is None
    kinds = [i.kind for i in store.history(cid)][-3:]
    assert kinds == [ItemKind.USER, ItemKind.RETRIEVAL, ItemKind.ASSISTANT]


def test_a_turn_that_fails_gives_the_lease_back(tmp_path: Path) -> None:
    from threadline.errors import ModelCallFailed

    store = SQLiteStore(tmp_path / "t.db")
    model = ScriptedModel()
    engine = Engine(store, model)
    cid = engine.run_turn("hello").conversation_id
    model.enqueue(RuntimeError("provider down"))
    with pytest.raises(ModelCallFailed):
        engine.run_turn("again", conversation_id=cid)
    assert store.lease_holder(cid, time.time()) is None
    assert engine.answer(cid).reply.text  # and the retry takes and gives it back too
    assert store.lease_holder(cid, time.time()) is None


class Renewals:
    """Just enough of a store for a hold: it records each renewal, by holder."""

    def __init__(self) -> None:
        self.renewed: list[tuple[str, float]] = []
        self.cancel = False

    def renew_lease(self, conversation_id: str, holder: str, ttl_s: float, now: float) -> Lease:
        self.renewed.append((conversation_id, time.monotonic()))
        return Lease(True, holder, now + ttl_s, self.cancel)


def test_one_heartbeat_renews_each_held_lease_on_its_own_beat_and_none_once_given_back(
        ) -> None:
    store = Renewals()
    fast = Holding(store, "fast", LeasePolicy(ttl_s=1, heartbeat_s=0.05),  # type: ignore[arg-type]
                   time.time, time.sleep)
    slow = Holding(store, "slow", LeasePolicy(ttl_s=1, heartbeat_s=0.2),  # type: ignore[arg-type]
                   time.time, time.sleep)
    before = {t.name for t in threading.enumerate()}
    fast.took()
    slow.took()
    time.sleep(0.45)
    threads = {t.name for t in threading.enumerate()} - before
    assert threads <= {"threadline-heartbeat"}  # one thread for both, none per turn
    store.cancel = True  # a newer message asks: the next beat notices
    deadline = time.monotonic() + 5
    while not fast.stopped and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fast.stopped and not fast.lost
    fast.gave_back()
    slow.gave_back()
    counts = {name: sum(1 for cid, _ in store.renewed if cid == name) for name in ("fast", "slow")}
    assert counts["fast"] >= 6 and counts["slow"] >= 1
    assert counts["fast"] > 2 * counts["slow"]  # each on its own beat
    given_back = len(store.renewed)
    time.sleep(0.3)
    assert len(store.renewed) == given_back  # nothing renews a lease that was given back


@pytest.mark.parametrize("where", ["conversation", "branch"])
def test_an_unknown_id_fails_at_once_even_while_another_turn_holds_the_lease(
        tmp_path: Path, where: str) -> None:
    from threadline.errors import UnknownBranch, UnknownConversation

    engine, store, _ = _replica(tmp_path / "t.db", ttl_s=30.0, on_busy="queue")
    cid = engine.run_turn("hello").conversation_id
    store.lease(cid, "lease_other", 30.0, time.time())  # a live holder: a known id would wait
    before = list(store.history(cid))
    started = time.monotonic()
    with pytest.raises(UnknownConversation if where == "conversation" else UnknownBranch):
        engine.run_turn("hello again", conversation_id="c_missing" if where == "conversation"
                        else cid, branch="main" if where == "conversation" else "nowhere")
    assert time.monotonic() - started < 5  # refused, not queued behind the lease
    assert list(store.history(cid)) == before
    assert store.lease_holder(cid, time.time()).holder == "lease_other"  # type: ignore[union-attr]


class Tracing(SQLiteStore):
    """A store that keeps every statement it runs."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        self.statements: list[str] = []
        super().__init__(*args, **kwargs)

    def _execute_on(self, conn, sql, params=()):  # type: ignore[no-untyped-def]
        self.statements.append(" ".join(sql.split()))
        return super()._execute_on(conn, sql, params)


def test_a_turn_reads_its_conversation_only_with_its_history(tmp_path: Path) -> None:
    store = Tracing(tmp_path / "t.db")
    engine = Engine(store, ScriptedModel(), system="be brief")
    cid = engine.run_turn("hello").conversation_id
    engine.run_turn("and again", conversation_id=cid)
    store.statements.clear()
    engine.run_turn("a third time", conversation_id=cid)
    reads = [s for s in store.statements if s.startswith("SELECT") and "FROM conversations" in s]
    assert len(reads) == 1 and "JOIN items" in reads[0], reads
    assert engine.request_for(cid).messages[0].content == "be brief"


def test_a_turn_reads_its_branch_once_and_assembles_from_what_it_committed(
        tmp_path: Path) -> None:
    store = Tracing(tmp_path / "t.db")
    engine = Engine(store, ScriptedModel())
    cid = engine.run_turn("hello").conversation_id
    engine.run_turn("and again", conversation_id=cid)
    store.statements.clear()
    result = engine.run_turn("a third time", conversation_id=cid)
    item_reads = [s for s in store.statements if s.startswith("SELECT") and " items " in s
                  and "max(seq)" not in s]  # the commits' own head checks aside
    assert len(item_reads) == 1, item_reads
    # what was assembled is the branch as the log holds it
    fresh = SQLiteStore(tmp_path / "t.db")
    try:
        history = fresh.history(cid)
        assert engine.request_for(cid) == Engine(fresh, ScriptedModel()).assembler(cid)(history)
        assert [i.text for i in history[-2:]] == ["a third time", result.reply.text]
    finally:
        fresh.close()
