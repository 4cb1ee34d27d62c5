"""Traces from the CLI: ``threadline serve`` (and any command that runs turns) traces where the
OTEL_* environment asks, exports over OTLP/HTTP as it ends, takes each request's trace context,
and refuses a setting it cannot honour before it writes anything."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Invoke, snapshot

pytest.importorskip("opentelemetry.sdk", reason="install the otel extra: scripts/bootstrap otel")

from fastapi import FastAPI  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from threadline.tracing.receiver import OTLPReceiver  # noqa: E402

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as running:
        yield running


def test_serve_exports_each_turn_under_the_callers_trace(
        tl: Invoke, receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    answered: list[dict[str, Any]] = []

    def run(app: FastAPI, **_: Any) -> None:  # instead of listening: one turn through the app
        client = TestClient(app)
        cid = client.post("/v1/conversations", json={}).json()["id"]
        answered.append(client.post(
            f"/v1/conversations/{cid}/messages", json={"text": "hello"},
            headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}).json())
    monkeypatch.setattr("uvicorn.run", run)
    served = tl("serve", env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                              "OTEL_SERVICE_NAME": "support-desk"})
    assert served.code == 0, served.err
    assert "traces on" in served.err
    spans = receiver.wait_for(lambda got: any(s.name == "threadline.turn" for s in got))
    turn = next(s for s in spans if s.name == "threadline.turn")
    assert (turn.trace_id, turn.parent_span_id) == (TRACE_ID, PARENT_ID)
    assert turn.attributes["gen_ai.conversation.id"] == answered[0]["conversation_id"]
    assert turn.resource["service.name"] == "support-desk"
    call = next(s for s in spans if s.name == "chat scripted")
    assert call.parent_span_id == turn.span_id and call.trace_id == TRACE_ID


def test_serve_counts_what_the_span_recorder_dropped_in_its_metrics(
        tl: Invoke, receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("prometheus_client", reason="install the metrics extra")
    scraped: list[str] = []

    def run(app: FastAPI, **_: Any) -> None:
        scraped.append(TestClient(app).get("/metrics").text)
    monkeypatch.setattr("uvicorn.run", run)
    served = tl("serve", "--metrics", env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
    assert served.code == 0, served.err
    assert "threadline_trace_dropped_turns_total 0.0" in scraped[0]
    assert "threadline_trace_relay_restarts_total 0.0" in scraped[0]


def test_a_cli_turn_is_exported_as_the_command_ends(tl: Invoke,
                                                    receiver: OTLPReceiver) -> None:
    run = tl("chat", "--once", "hello", "--json",
             env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
    assert run.code == 0, run.err
    spans = receiver.spans  # flushed before the command returned (no waiting here)
    assert {"threadline.turn", "threadline.ingest", "chat scripted"} <= {s.name for s in spans}
    turn = next(s for s in spans if s.name == "threadline.turn")
    assert turn.parent_span_id is None  # no caller's trace: the turn is the root
    assert turn.attributes["gen_ai.conversation.id"] == run.json()["conversation_id"]


@pytest.mark.parametrize(("env", "named"), [
    ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
      "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL")])
def test_a_bad_setting_fails_a_cli_turn_before_anything_is_written(
        tl: Invoke, home: Path, env: dict[str, str], named: str) -> None:
    seeded = tl("chat", "--once", "hello", "--json")
    assert seeded.code == 0
    before = snapshot(home)
    refused = tl("chat", "--once", "again", "--conversation",
                 seeded.json()["conversation_id"], env=env)
    assert refused.code != 0
    assert named in refused.err and env[named] in refused.err
    assert snapshot(home) == before


def test_serve_refuses_a_bad_setting_before_listening(
        tl: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    listened: list[FastAPI] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **_: listened.append(app))
    refused = tl("serve", env={"OTEL_TRACES_EXPORTER": "jaeger"})
    assert refused.code != 0 and "OTEL_TRACES_EXPORTER" in refused.err
    assert listened == []
