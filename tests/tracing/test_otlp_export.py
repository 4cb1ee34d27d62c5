"""End to end: turns exported by the SDK's OTLP/HTTP exporter through a batch span processor
into a receiver listening on 127.0.0.1, and what arrived decoded from its protobuf; the
receiver's own refusals; and a receiver that is down never holding up or failing a turn."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.tracing.conftest import tools
from threadline.models.scripted import ScriptedModel, ToolCalls
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.tracing.config import TraceConfig
from threadline.tracing.receiver import OTLPReceiver, ReceivedSpan
from threadline.tracing.setup import Tracing


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as running:
        yield running


def _exporting(monkeypatch: pytest.MonkeyPatch, endpoint: str, **env: str) -> Tracing:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Tracing.from_config(TraceConfig(("otlp",)))


def _by_name(spans: list[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
    out: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        out.setdefault(span.name, []).append(span)
    return out


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_turns_arrive_over_otlp_http_as_a_tree_with_their_attributes(
        store: SQLiteStore, receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch,
        compression: str) -> None:
    tracing = _exporting(monkeypatch, receiver.endpoint,
                         OTEL_EXPORTER_OTLP_COMPRESSION=compression,
                         OTEL_SERVICE_NAME="support-desk")
    model = ScriptedModel([ToolCalls.of(("weather", {"city": "Oslo"})), "It is sunny."])
    engine = standard_engine(store, model, tools=tools(), tracer=tracing)
    first = engine.run_turn("Weather in Oslo?")
    second = engine.run_turn("Thanks!", conversation_id=first.conversation_id)
    assert tracing.flush()
    spans = receiver.wait_for(lambda got: sum(s.name == "threadline.turn" for s in got) == 2)
    tracing.shutdown()
    named = _by_name(spans)
    turns = named["threadline.turn"]
    assert [t.attributes["threadline.turn.index"] for t in turns] == [1, 2]
    assert all(t.parent_span_id is None for t in turns)
    ids = {t.trace_id: t.span_id for t in turns}
    assert len(ids) == 2  # a trace per turn
    for span in spans:  # every other span hangs off its turn's span
        if span.name != "threadline.turn":
            assert span.parent_span_id == ids[span.trace_id], span.name
    assert sorted(named) == sorted([
        "threadline.turn", "threadline.provider working state", "threadline.provider memory",
        "threadline.ingest", "chat scripted", "threadline.commit tool_calls",
        "execute_tool weather", "threadline.commit reply"])
    calls = store.calls(first.conversation_id)
    received = sorted(named["chat scripted"], key=lambda s: s.start_ns)
    assert len(received) == len(calls) == 3
    for span, call in zip(received, calls, strict=True):
        assert span.kind == "SPAN_KIND_INTERNAL"
        got = span.attributes
        assert got["gen_ai.operation.name"] == "chat"
        assert got["gen_ai.provider.name"] == "threadline.scripted"
        assert got["gen_ai.request.model"] == "scripted"
        assert got["gen_ai.conversation.id"] == first.conversation_id
        assert got["gen_ai.usage.input_tokens"] == call.usage.prompt_tokens  # ints stay ints
        assert got["gen_ai.usage.output_tokens"] == call.usage.completion_tokens
        assert got["gen_ai.usage.cache_read.input_tokens"] == call.usage.cached_tokens
        assert got["gen_ai.response.finish_reasons"] == [call.response["finish_reason"]]
        assert got["threadline.prefix.cause"] == (call.prefix or {})["cause"]
        assert got["threadline.prefix.reuse_ratio"] == pytest.approx(
            (call.prefix or {})["ratio"])
        assert got["threadline.turn.index"] == call.turn
        assert "gen_ai.input.messages" not in got
    assert received[-1].attributes["threadline.prefix.cause"] == "append_only"
    assert named["threadline.turn"][1].attributes["threadline.call.id"] == second.call.id
    tool = named["execute_tool weather"][0]
    assert tool.attributes["gen_ai.tool.call.id"] == first.tool_results[0].content["call_id"]
    assert spans[0].resource["service.name"] == "support-desk"
    assert spans[0].scope == "threadline"
    assert receiver.refused == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: nothing listens there


def test_a_receiver_that_is_down_never_holds_up_or_fails_a_turn(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    tracing = _exporting(monkeypatch, f"http://127.0.0.1:{_free_port()}",
                         OTEL_EXPORTER_OTLP_TIMEOUT="1", OTEL_BSP_SCHEDULE_DELAY="10")
    engine = standard_engine(store, ScriptedModel(), tracer=tracing)
    took = []
    cid = None
    for n in range(6):
        started = time.perf_counter()
        cid = engine.run_turn(f"message {n}", conversation_id=cid).conversation_id
        took.append(time.perf_counter() - started)
        time.sleep(0.05)  # the exporter's thread tries meanwhile, and fails
    assert max(took) < 0.9  # below the exporter's 1 s timeout: nothing waited for it
    assert len(store.calls(cid)) == 6
    tracing.shutdown()


def _post(receiver: OTLPReceiver, path: str, body: bytes, content_type: str,
          **headers: str) -> int:
    request = urllib.request.Request(f"{receiver.endpoint}{path}", data=body, method="POST",
                                     headers={"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as err:
        return err.code


def test_the_receiver_refuses_what_a_collector_would(receiver: OTLPReceiver) -> None:
    valid = ExportTraceServiceRequest().SerializeToString()
    assert _post(receiver, "/v1/metrics", valid, "application/x-protobuf") == 404
    assert _post(receiver, "/v1/traces", b"{}", "application/json") == 415
    assert _post(receiver, "/v1/traces", b"\xff\xff\xff", "application/x-protobuf") == 400
    assert _post(receiver, "/v1/traces", b"not gzip", "application/x-protobuf",
                 **{"Content-Encoding": "gzip"}) == 400
    assert receiver.refused == 4 and receiver.requests == 0 and receiver.spans == []
    assert _post(receiver, "/v1/traces", gzip.compress(valid), "application/x-protobuf",
                 **{"Content-Encoding": "gzip"}) == 200
    assert receiver.requests == 1
    with pytest.raises(TimeoutError):
        receiver.wait_for(lambda got: len(got) > 0, timeout_s=0.1)


def test_the_receiver_runs_as_a_process_of_its_own(store: SQLiteStore,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    process = subprocess.Popen([sys.executable, "-m", "threadline.tracing.receiver", "--print"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    endpoint = json.loads(process.stdout.readline())["endpoint"]
    tracing = _exporting(monkeypatch, endpoint)
    result = standard_engine(store, ScriptedModel(), tracer=tracing).run_turn("hello")
    tracing.shutdown()  # flushes to the receiver
    out, _ = process.communicate(timeout=30)  # its input ends: it reports and exits
    lines = [json.loads(line) for line in out.splitlines()]
    assert process.returncode == 0
    assert lines[-1] == {"spans": len(lines) - 1, "requests": 1, "refused": 0}
    turn = next(line for line in lines if line.get("name") == "threadline.turn")
    assert turn["attributes"]["gen_ai.conversation.id"] == result.conversation_id
