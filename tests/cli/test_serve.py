"""``threadline serve``: metrics on by default where prometheus-client is installed, off with
--no-metrics or THREADLINE_METRICS=0, refused when asked for without the extra."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.cli.conftest import Invoke


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Instead of listening: one turn through the app, then what GET /metrics answered."""
    scraped: list[int] = []

    def run(app: FastAPI, **_: Any) -> None:
        scraped.append(_scraped(app))
    monkeypatch.setattr("uvicorn.run", run)
    return scraped


def _scraped(app: FastAPI) -> int:
    client = TestClient(app)
    cid = client.post("/v1/conversations", json={}).json()["id"]
    client.post(f"/v1/conversations/{cid}/messages", json={"text": "hello"})
    response = client.get("/metrics")
    if response.status_code == 200:
        assert 'threadline_turns_total{status="ok"} 1.0' in response.text
    return response.status_code


def test_serve_exports_metrics_by_default(tl: Invoke, served: list[int]) -> None:
    run = tl("serve")
    assert run.code == 0, run.err
    assert "metrics at /metrics" in run.err
    assert served[0] == 200


@pytest.mark.parametrize(("args", "env"), [(["--no-metrics"], {}),
                                           ([], {"THREADLINE_METRICS": "0"})])
def test_metrics_can_be_turned_off(tl: Invoke, served: list[int], args: list[str],
                                   env: dict[str, str]) -> None:
    assert tl("serve", *args, env=env).code == 0
    assert served[0] == 404


def test_metrics_without_the_extra_are_off_unless_asked_for(
        tl: Invoke, served: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.import_module("threadline.cli.serve"), "available",
                        lambda: False)
    assert tl("serve").code == 0
    assert served[0] == 404
    refused = tl("serve", "--metrics")
    assert refused.code != 0 and "threadline[metrics]" in refused.err
    assert len(served) == 1  # refused before listening
