"""The call, memory and stats pages in a real browser: Debian's Chromium, headless, driven by
Playwright, against the service running on loopback (uvicorn). The shaded prefix measured
in the browser's own DOM, the segments opened and closed from the keyboard, a deletion
refused by the browser until it is confirmed and then real, the charts' accessible names;
a screenshot of each page is saved as a test artefact.

The browser is the suite's one Chromium (``conftest.py``): without Playwright or
/usr/bin/chromium these skip, except where THREADLINE_REQUIRE_BROWSER=1 (scripts/test), where
that is a failure. Nothing is downloaded."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.inspector._views_app import World, build_world, table_rows, views_app
from threadline.memory import MemoryStore
from threadline.stores.sqlite import SQLiteStore

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow


@pytest.fixture
def tab(page: Page) -> Page:
    """A tab of the suite's one Chromium (``conftest.py``: its ``page``, with no cookies)."""
    return page


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, World]]:
    """The pages over a fresh fixture store, served by uvicorn on 127.0.0.1."""
    import uvicorn

    store = SQLiteStore(tmp_path / "threadline.db")
    world = build_world(store)
    server = uvicorn.Server(uvicorn.Config(views_app(world.engine), host="127.0.0.1",
                                           port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", world
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        store.close()


def screenshot(page: Page, name: str, base: Path) -> None:
    where = os.environ.get("THREADLINE_ARTEFACTS")
    folder = Path(where) if where else base / "inspector-artefacts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000


def test_the_call_page_in_chromium(served: tuple[str, World], tab: Page,
                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    url, world = served
    call = world.call_with("compaction_reset")
    tab.goto(f"{url}/ui/calls/{call.id}")
    measured: dict[str, Any] = tab.evaluate("""() => {
        const mark = document.getElementById('reused-prefix');
        return {bytes: new TextEncoder().encode(mark.textContent).length,
                said: Number(mark.dataset.reusedBytes),
                raw: new TextEncoder().encode(
                    document.getElementById('raw-bytes').textContent).length};
    }""")
    assert measured["bytes"] == measured["said"] == call.prefix["reused_bytes"]
    assert measured["raw"] == call.prefix["prompt_bytes"]
    box = tab.locator("#divergence")
    assert box.is_visible()
    assert box.get_attribute("data-segment") == "pinned"
    # the stylesheet is served and applied: the reused prefix is shaded
    shade = tab.evaluate("getComputedStyle(document.getElementById('reused-prefix'))"
                         ".backgroundColor")
    assert shade not in ("rgba(0, 0, 0, 0)", "transparent")
    # from the keyboard: the skip link, then the segments' summaries open and close
    tab.keyboard.press("Tab")
    assert tab.evaluate("document.activeElement.className") == "skip"
    history = tab.locator("details[data-segment=history]")
    assert history.get_attribute("open") is not None
    history.locator("summary").focus()
    tab.keyboard.press("Enter")
    assert history.get_attribute("open") is None
    tab.keyboard.press("Enter")
    assert history.get_attribute("open") is not None
    screenshot(tab, "call", tmp_path_factory.getbasetemp())


def test_a_deletion_in_chromium_waits_for_its_confirmation_then_is_real(
        served: tuple[str, World], tab: Page, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    url, world = served
    tab.goto(f"{url}/ui/memory/ann")
    screenshot(tab, "memory", tmp_path_factory.getbasetemp())
    entry = tab.locator(f"#entry-{world.ann_edited}")
    entry.get_by_role("link", name="Delete…").click()
    tab.wait_for_url(f"**/ui/memory/ann/{world.ann_edited}/delete")
    before = table_rows(tmp_path / "threadline.db")
    tab.get_by_role("button", name="Delete").click()  # not ticked: the browser refuses
    assert tab.url.endswith("/delete")
    assert tab.evaluate("document.querySelector('form.confirm').checkValidity()") is False
    assert table_rows(tmp_path / "threadline.db") == before
    box = tab.get_by_role("checkbox")
    box.focus()
    tab.keyboard.press("Space")
    assert box.is_checked()
    screenshot(tab, "memory-delete", tmp_path_factory.getbasetemp())
    tab.get_by_role("button", name="Delete").click()
    tab.wait_for_url("**/ui/memory/ann?done=deleted")
    assert "was deleted" in tab.locator("p.notice").inner_text()
    assert tab.locator(f"#entry-{world.ann_edited}").count() == 0
    ids = {e.id for e in MemoryStore(world.store).entries("ann", history=True)}
    assert world.ann_edited not in ids and world.ann_original not in ids


def test_the_stats_charts_in_chromium(served: tuple[str, World], tab: Page,
                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    url, _ = served
    tab.goto(f"{url}/ui/stats")
    charts = tab.get_by_role("img")
    assert charts.count() == 4
    names = [charts.nth(i).evaluate(
        "svg => svg.querySelector('#' + svg.getAttribute('aria-labelledby').split(' ')[0])"
        ".textContent") for i in range(4)]
    assert names == ["Time to first token", "Reuse: cached ÷ prompt tokens",
                     "Prompt tokens per turn", "Cost per turn"]
    box = charts.nth(1).bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 100
    screenshot(tab, "stats", tmp_path_factory.getbasetemp())
