"""The span relay (``threadline/tracing/relay.py``): the process that exports recorded turns.
A relay that died, stalled or answers late never fails or holds up a turn; what it cannot
take is dropped and counted, and what it took arrives once it catches up."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from threadline.models.scripted import ScriptedModel
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.tracing import relay
from threadline.tracing.config import TraceConfig
from threadline.tracing.receiver import OTLPReceiver
from threadline.tracing.setup import Tracing


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as running:
        yield running


@pytest.fixture
def tracing(receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tracing]:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    made = Tracing.from_config(TraceConfig(("otlp",)))
    yield made
    made.shutdown()


def _relay(tracing: Tracing) -> relay.Relay:
    assert tracing.recorder is not None
    sink = tracing.recorder.batches.sink
    assert isinstance(sink, relay.Relay)
    return sink


def _turns(store: SQLiteStore, tracing: Tracing, n: int) -> tuple[list[float], str]:
    """``n`` turns of one conversation, each handed to the relay as it ends; how long each
    took, and the conversation."""
    assert tracing.recorder is not None
    engine = standard_engine(store, ScriptedModel(), tracer=tracing)
    took, cid = [], None
    for k in range(n):
        started = time.perf_counter()
        cid = engine.run_turn(f"message {k} " + "x" * 400, conversation_id=cid).conversation_id
        took.append(time.perf_counter() - started)
        tracing.recorder.batches.export()  # a batch a turn: the relay's pipe fills sooner
    assert cid is not None
    return took, cid


def test_a_relay_that_is_gone_never_fails_or_holds_up_a_turn(
        store: SQLiteStore, tracing: Tracing, caplog: pytest.LogCaptureFixture) -> None:
    relayed = _relay(tracing)
    relayed.process.kill()
    relayed.process.wait()
    with caplog.at_level(logging.WARNING):
        took, cid = _turns(store, tracing, 4)
    assert max(took) < 1.0 and len(store.history(cid)) == 8
    assert not tracing.flush(2000)
    assert relayed.dropped >= 3  # the first batch may have met the closed pipe first
    assert "span relay exited" in caplog.text


def test_a_stalled_relay_costs_turns_nothing_and_catches_up(
        store: SQLiteStore, receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(relay, "PIPE_BYTES", 4096)
    monkeypatch.setattr(relay, "MAX_WAITING", 16_384)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    tracing = Tracing.from_config(TraceConfig(("otlp",)))
    relayed = _relay(tracing)
    assert tracing.flush()  # the relay is up and reading
    os.kill(relayed.process.pid, signal.SIGSTOP)
    try:
        with caplog.at_level(logging.WARNING):
            took, _ = _turns(store, tracing, 40)
        assert max(took) < 1.0
        assert not tracing.flush(300)  # it cannot answer while stopped
        assert 0 < relayed.dropped < 40
        assert "bytes behind" in caplog.text
    finally:
        os.kill(relayed.process.pid, signal.SIGCONT)
    assert tracing.flush()
    kept = 40 - relayed.dropped
    spans = receiver.wait_for(lambda got: len(got) >= 6 * kept)
    assert len(spans) == 6 * kept  # every turn it took, whole; none twice
    assert len([s for s in spans if s.name == "threadline.turn"]) == kept
    tracing.shutdown()


def test_shutdown_exports_what_waits_and_ends_the_relay(store: SQLiteStore,
                                                        receiver: OTLPReceiver,
                                                        tracing: Tracing) -> None:
    assert tracing.flush()  # the relay is ready
    engine = standard_engine(store, ScriptedModel(), tracer=tracing)
    engine.run_turn("hello")
    relayed = _relay(tracing)
    tracing.shutdown()  # no flush before: the turn still waits on the recorder's queue
    assert relayed.process.poll() == 0  # it exported what it was handed, and exited
    assert len(receiver.wait_for(lambda got: len(got) >= 6)) == 6
    tracing.shutdown()  # twice is harmless


def test_a_command_that_ends_before_its_relay_is_ready_exports_its_turns_itself(
        store: SQLiteStore, receiver: OTLPReceiver, tracing: Tracing) -> None:
    relayed = _relay(tracing)
    os.kill(relayed.process.pid, signal.SIGSTOP)  # microseconds after it was started
    relayed._answers_now(0)
    assert not relayed._ready  # it cannot have built its exporters yet
    standard_engine(store, ScriptedModel(), tracer=tracing).run_turn("hello")
    started = time.perf_counter()
    tracing.shutdown()
    assert time.perf_counter() - started < 5  # not waiting for the relay to start
    assert relayed.process.poll() is not None  # stopped: it was never handed anything
    spans = receiver.wait_for(lambda got: len(got) >= 6)
    assert len(spans) == 6 and relayed.dropped == 0


def test_a_relay_that_exited_is_started_again_and_exports_what_follows(
        store: SQLiteStore, receiver: OTLPReceiver, tracing: Tracing,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    relayed = _relay(tracing)
    first = relayed.process
    monkeypatch.setattr(relay, "RESTART_S", 0.0)
    first.kill()
    first.wait()
    with caplog.at_level(logging.WARNING):
        _turns(store, tracing, 3)  # the first batch finds it gone; the next starts another
    assert relayed.process is not first and relayed.restarts == 1
    assert "starting the span relay again" in caplog.text
    assert tracing.flush()
    spans = receiver.wait_for(lambda got: len(got) >= 6 * (3 - relayed.dropped))
    assert 1 <= relayed.dropped <= 2 and len(spans) == 6 * (3 - relayed.dropped)


def test_a_forked_process_exports_its_own_turns_through_a_relay_of_its_own(
        tmp_path: Path, store: SQLiteStore, receiver: OTLPReceiver, tracing: Tracing) -> None:
    engine = standard_engine(store, ScriptedModel(), tracer=tracing)
    engine.run_turn("before the fork")  # queued in the parent, not yet exported
    parent_relay = _relay(tracing).process.pid
    child = os.fork()
    if child == 0:  # the child: a store of its own, the same tracing
        ok = False
        try:
            own = SQLiteStore(tmp_path / "child.db")
            standard_engine(own, ScriptedModel(), tracer=tracing).run_turn("in the child")
            ok = tracing.flush() and _relay(tracing).process.pid != parent_relay
            tracing.shutdown()
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    engine.run_turn("after the fork")
    assert tracing.flush() and _relay(tracing).process.pid == parent_relay
    spans = receiver.wait_for(lambda got: len(got) >= 18)
    turns = [s for s in spans if s.name == "threadline.turn"]
    assert len(spans) == 18 and len(turns) == 3  # each turn once: none queued twice


def test_what_the_relay_could_not_take_is_counted_in_the_metrics(
        store: SQLiteStore, tracing: Tracing, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("prometheus_client", reason="install the metrics extra")
    from prometheus_client.parser import text_string_to_metric_families

    from threadline.metrics.registry import Metrics

    metrics = Metrics()
    metrics.watch_traces(tracing)

    def scraped() -> dict[str, float]:
        return {s.name: s.value for f in text_string_to_metric_families(
            metrics.exposition().decode()) for s in f.samples
            if s.name.startswith("threadline_trace_") and not s.name.endswith("_created")}

    assert scraped() == {"threadline_trace_dropped_turns_total": 0.0,
                         "threadline_trace_relay_restarts_total": 0.0}
    relayed = _relay(tracing)
    relayed.process.kill()
    relayed.process.wait()
    _turns(store, tracing, 3)
    assert scraped()["threadline_trace_dropped_turns_total"] == relayed.dropped >= 3
    monkeypatch.setattr(relay, "RESTART_S", 0.0)
    _turns(store, tracing, 1)
    assert scraped()["threadline_trace_relay_restarts_total"] == 1.0
