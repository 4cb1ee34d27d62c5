"""Schemathesis against the service's OpenAPI spec: generated requests, valid and invalid, to
every operation. Whatever arrives, the answer is never a 5xx; a 4xx has the JSON error shape
with a message, and leaves the store as it was.

A streamed turn runs in its own thread and finishes whether or not its client keeps reading
(``server/streams.py``), so a stream left unread would go on writing during the next example
and its writes would be counted against that one. Each stream is read to its end instead: its
last event is sent only once the turn, its response record and any ``store: false`` clean-up
are written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from threadline.engine import Engine
from threadline.models.scripted import ScriptedModel
from threadline.server.app import create_app
from threadline.stores.base import Store
from threadline.stores.sqlite import SQLiteStore

# schemathesis stops reading a stream after 20 events, or at its 10 s request timeout
WHOLE_STREAMS = {"max-stream-events": 1_000_000, "request-timeout": 60}


def _counts(store: Store) -> tuple[int, ...]:
    summaries = store.conversations()
    return (len(summaries), *(sum(getattr(s, name) for s in summaries)
                               for name in ("items", "branches", "calls")))


def _fuzz(operation: Any, fixed: dict[str, str], mode: GenerationMode,
          store: Store) -> set[int]:
    """The statuses generated requests to ``operation`` got (none when nothing about it can
    be made invalid: only free-form strings)."""
    statuses: set[int] = set()

    @settings(max_examples=15, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=fixed))
    def check(case: Any) -> None:
        before = _counts(store)
        response = case.call_and_validate(checks=[not_a_server_error])
        assert not response.stream_cut_short, f"{operation.label}: a stream was left unread"
        statuses.add(response.status_code)
        if 400 <= response.status_code < 500:
            body = response.json()
            assert set(body) == {"error"} and body["error"]["message"], response.text
            assert _counts(store) == before, f"{operation.label} wrote on a 4xx"

    try:
        check()
    except Unsatisfiable:
        assert mode is GenerationMode.NEGATIVE, operation.label
    return statuses


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_request_gets_a_server_error_and_refused_ones_change_nothing(
        tmp_path: Path, mode: GenerationMode) -> None:
    store = SQLiteStore(tmp_path / "threadline.db")
    engine = Engine(store, ScriptedModel())
    cid = engine.run_turn("a conversation for the generated requests to find").conversation_id
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(engine),
                                            config=schemathesis.Config.from_dict(WHOLE_STREAMS))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 8
    seen: dict[str, set[int]] = {}

    targets = [(operation, {}) for operation in operations]
    # and again at an existing conversation, so requests get past the lookup (not DELETE:
    # the conversation has to stay for the others)
    targets += [(operation, {"conversation_id": cid}) for operation in operations
                if "{conversation_id}" in operation.path and operation.method != "delete"]
    for operation, fixed in targets:
        label = operation.label + (" (existing)" if fixed else "")
        seen[label] = _fuzz(operation, fixed, mode, store)
    assert {label.removesuffix(" (existing)") for label in seen} == {
        operation.label for operation in operations}
    for label in ("POST /v1/conversations/{conversation_id}/messages (existing)",
                  "POST /v1/chat/completions",
                  "POST /v1/responses",
                  "POST /v1/conversations/{conversation_id}/fork (existing)"):
        assert seen[label], f"no request reached {label}"
    store.close()
