"""Trace context through the HTTP API: a request's ``traceparent`` is the parent of the turn it
runs, answered in JSON, as a stream, or on the OpenAI-compatible endpoint; a request without
one starts a trace of its own; a malformed one is ignored, as W3C Trace Context says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="install the otel extra: scripts/bootstrap otel")

from fastapi.testclient import TestClient  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402

from tests.tracing.conftest import HOW, Traced  # noqa: E402
from threadline.models.scripted import ScriptedModel  # noqa: E402
from threadline.server.app import create_app  # noqa: E402
from threadline.standard import standard_engine  # noqa: E402
from threadline.stores.sqlite import SQLiteStore  # noqa: E402

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.fixture(params=HOW)
def traced(request: pytest.FixtureRequest) -> Iterator[Traced]:
    made = Traced(recorded=request.param == "recorded")
    yield made
    made.tracing.shutdown()


@pytest.fixture
def client(tmp_path: Path, traced: Traced) -> Iterator[TestClient]:
    store = SQLiteStore(tmp_path / "threadline.db")
    engine = standard_engine(store, ScriptedModel(), tracer=traced.tracing)
    yield TestClient(create_app(engine, tracing=traced.tracing))
    store.close()


def _conversation(client: TestClient) -> str:
    cid: str = client.post("/v1/conversations", json={}).json()["id"]
    return cid


def _turn(traced: Traced) -> ReadableSpan:
    [turn] = traced.named("threadline.turn")
    return turn


def _ids(span: ReadableSpan) -> tuple[str, str | None]:
    assert span.context is not None
    parent = None if span.parent is None else f"{span.parent.span_id:016x}"
    return f"{span.context.trace_id:032x}", parent


def test_a_json_turn_is_a_child_of_the_callers_span(client: TestClient,
                                                    traced: Traced) -> None:
    cid = _conversation(client)
    answered = client.post(f"/v1/conversations/{cid}/messages", json={"text": "hello"},
                           headers={"traceparent": TRACEPARENT})
    assert answered.status_code == 200
    turn = _turn(traced)
    assert _ids(turn) == (TRACE_ID, PARENT_ID)
    assert turn.parent is not None and turn.parent.is_remote
    assert turn.attributes and turn.attributes["gen_ai.conversation.id"] == cid
    for span in traced.spans:  # the whole turn is in the caller's trace
        assert _ids(span)[0] == TRACE_ID


def test_a_streamed_turn_is_a_child_of_the_callers_span(client: TestClient,
                                                        traced: Traced) -> None:
    cid = _conversation(client)
    with client.stream("POST", f"/v1/conversations/{cid}/messages",
                       json={"text": "stream it", "stream": True},
                       headers={"traceparent": TRACEPARENT}) as response:
        events = [line for line in response.iter_lines() if line.startswith("event:")]
    assert events[-1] == "event: done"
    assert _ids(_turn(traced)) == (TRACE_ID, PARENT_ID)
    assert {_ids(s)[0] for s in traced.spans} == {TRACE_ID}


def test_the_openai_compatible_endpoint_takes_the_trace_context_too(
        client: TestClient, traced: Traced) -> None:
    body: dict[str, Any] = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}
    answered = client.post("/v1/chat/completions", json=body,
                           headers={"traceparent": TRACEPARENT})
    assert answered.status_code == 200
    assert _ids(_turn(traced)) == (TRACE_ID, PARENT_ID)


@pytest.mark.parametrize("headers", [{}, {"traceparent": "00-not-a-trace-01"},
                                     {"traceparent": f"00-{'0' * 32}-{PARENT_ID}-01"}])
def test_without_a_valid_traceparent_the_turn_starts_its_own_trace(
        client: TestClient, traced: Traced, headers: dict[str, str]) -> None:
    cid = _conversation(client)
    assert client.post(f"/v1/conversations/{cid}/messages", json={"text": "hello"},
                       headers=headers).status_code == 200
    trace_id, parent = _ids(_turn(traced))
    assert parent is None and trace_id != TRACE_ID


def test_requests_do_not_leak_their_context_into_each_other(client: TestClient,
                                                            traced: Traced) -> None:
    cid = _conversation(client)
    client.post(f"/v1/conversations/{cid}/messages", json={"text": "one"},
                headers={"traceparent": TRACEPARENT})
    client.post(f"/v1/conversations/{cid}/messages", json={"text": "two"})
    first, second = traced.named("threadline.turn")
    assert _ids(first) == (TRACE_ID, PARENT_ID)
    assert _ids(second)[1] is None and _ids(second)[0] != TRACE_ID
