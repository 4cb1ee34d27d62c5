"""``threadline ui`` and the inspector in ``threadline serve``: on by default, off with
--no-ui; ``ui`` listens on loopback, prints the URL, and opens a browser only where one
exists."""

from __future__ import annotations

import socket
import webbrowser
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.cli.conftest import Invoke


@pytest.fixture
def listened(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Instead of listening: what uvicorn was given, and what /ui answered."""
    seen: list[dict[str, Any]] = []

    def run(app: FastAPI, **options: Any) -> None:
        page = TestClient(app).get("/ui", headers={"accept": "text/html"})
        seen.append({**options, "status": page.status_code})
    monkeypatch.setattr("uvicorn.run", run)
    return seen


def test_serve_has_the_inspector_unless_told_not_to(tl: Invoke,
                                                    listened: list[dict[str, Any]]) -> None:
    on = tl("serve", "--no-metrics")
    assert on.code == 0 and "inspector at /ui" in on.err
    off = tl("serve", "--no-metrics", "--no-ui")
    assert off.code == 0 and "inspector at" not in off.err
    assert [seen["status"] for seen in listened] == [200, 404]


def test_ui_listens_on_loopback_and_prints_the_url(
        tl: Invoke, listened: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []

    class Browser(webbrowser.BackgroundBrowser):
        def open(self, url: str, new: int = 0, autoraise: bool = True) -> bool:
            opened.append(url)
            return True
    monkeypatch.setattr(webbrowser, "get", lambda using=None: Browser("true"))
    run = tl("ui", "--no-browser")
    assert run.code == 0, run.err
    url = run.out.strip()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/ui")
    assert listened[0]["status"] == 200 and "fd" in listened[0]
    assert opened == []  # --no-browser


def test_ui_without_a_browser_still_serves(tl: Invoke, listened: list[dict[str, Any]],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def none(using: str | None = None) -> webbrowser.BaseBrowser:
        raise webbrowser.Error("could not locate runnable browser")
    monkeypatch.setattr(webbrowser, "get", none)
    run = tl("ui")
    assert run.code == 0, run.err
    assert run.out.strip().endswith("/ui") and listened[0]["status"] == 200


def test_ui_refuses_a_port_in_use(tl: Invoke, listened: list[dict[str, Any]]) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        run = tl("ui", "--no-browser", "--port", str(taken.getsockname()[1]))
    finally:
        taken.close()
    assert run.code != 0 and "cannot listen on 127.0.0.1:" in run.err
    assert "choose another --port" in run.err and listened == []
