"""What the inspector's tests share: a fixture store, the service running on loopback, and a
real browser (Debian's Chromium driven by Playwright) with a place for screenshots.

- ``world``: a copy, for this test, of a store built once per session: Ann's conversation is
  the replay fixture log (tests/replay/log.py: retrieval, memory recall, a tool call, a
  failed call and its retry, a compaction with its constraint extraction, a regenerate and an
  edit, the memory writer's side calls), owned by ``ann``; Bob's is two turns, owned by
  ``bob``; the ops conversation (one turn) is no one's (admin only). No token exists until a
  test calls ``world.tokens()``, so the service is open on loopback until then.
- ``serve``: starts the service (the API and the inspector, as ``threadline serve`` composes
  them) over the world's store with uvicorn on 127.0.0.1 and a free port, in a thread; the
  server stops at the end of the test.
- ``page``: a fresh tab of one headless Chromium per session (an empty profile of its own),
  cookies cleared; ``screenshot(page, name)`` saves a PNG under the artefacts folder:
  ``$THREADLINE_ARTEFACTS`` if set, else ``inspector-artefacts`` in pytest's temporary base
  folder, printed at the end of the run.

Without Playwright or /usr/bin/chromium the browser tests skip, except under scripts/test
(``THREADLINE_REQUIRE_BROWSER=1``), where that is a failure. Nothing is ever downloaded: the
browser is Debian's ``chromium`` (scripts/bootstrap's ``browser`` extra installs it).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from threadline.engine import Engine
from threadline.items import NewItem, utc_now
from threadline.models.scripted import ScriptedModel
from threadline.stores.base import Commit, NewConversation
from threadline.stores.sqlite import SQLiteStore
from threadline.stores.tokens import TokenRole, issue

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
ANN_TITLE, BOB_TITLE, OPS_TITLE = "Lisbon trip", "Bob's garden", "Ops runbook"


@dataclass
class World:
    """The fixture store, copied for one test: where it is and what is in it."""

    path: Path
    ann: str   # conversation ids
    bob: str
    ops: str
    secrets: dict[str, str] = field(default_factory=dict)  # "admin", "ann", "bob"

    def open(self) -> SQLiteStore:
        return SQLiteStore(self.path)

    def tokens(self) -> dict[str, str]:
        """Issue an admin token and one each for ann and bob (from now on the service
        requires a token); their secrets by name."""
        if not self.secrets:
            store = self.open()
            try:
                for name in ("admin", "ann", "bob"):
                    role = TokenRole.ADMIN if name == "admin" else TokenRole.USER
                    user = None if name == "admin" else name
                    self.secrets[name] = issue(store.tokens, role=role, user_id=user,
                                               name=name, at=utc_now())[1]
            finally:
                store.close()
        return self.secrets


def _conversation(store: SQLiteStore, cid: str, title: str, owner: str | None,
                  system: str | None = None) -> None:
    store.commit(Commit(conversation_id=cid, created_at=utc_now(), expected_head=None,
                        create=NewConversation(cid, title=title, system=system, owner=owner)))


def build_world(path: Path) -> World:
    from tests.replay.log import engine_for, record

    store = SQLiteStore(path)
    try:
        _conversation(store, "c_ann", ANN_TITLE, "ann", system="You are terse.")
        record(store, "c_ann")
        _conversation(store, "c_bob", BOB_TITLE, "bob")
        engine = engine_for(store, ScriptedModel())
        engine.run_turn("Which roses grow in shade?", conversation_id="c_bob")
        engine.run_turn("And tulips?", conversation_id="c_bob")
        _conversation(store, "c_ops", OPS_TITLE, None)
        engine.run_turn("Restart the queue worker nightly.", conversation_id="c_ops")
        store.commit(Commit(conversation_id="c_ops", created_at=utc_now(), check_head=False,
                            items=[NewItem.note("kept for the runbook")]))
    finally:
        store.close()
    return World(path, "c_ann", "c_bob", "c_ops")


@pytest.fixture(scope="session")
def world_template(tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(tmp_path_factory.mktemp("inspector-world") / "world.db")


@pytest.fixture
def world(world_template: World, tmp_path: Path) -> World:
    """This test's own copy of the fixture store."""
    path = tmp_path / "world.db"
    for suffix in ("", "-wal", "-shm"):
        source = world_template.path.with_name(world_template.path.name + suffix)
        if source.exists():
            shutil.copyfile(source, path.with_name(path.name + suffix))
    return World(path, world_template.ann, world_template.bob, world_template.ops)


# -- the service on loopback ------------------------------------------------------------------

@dataclass
class Served:
    url: str
    store: SQLiteStore
    engine: Engine
    model: ScriptedModel


class LiveServer:
    """uvicorn serving ``app`` on 127.0.0.1 and a free port, in a thread of this process."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0,
                                                    log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


ServeFactory = Callable[..., Served]


@pytest.fixture
def serve(world: World) -> Iterator[ServeFactory]:
    """``serve(require_tokens=False, model=None)``: the API with the inspector mounted, over
    the world's store, running on loopback; its URL, store, engine and model."""
    pytest.importorskip("fastapi", reason="install the server extra")
    from tests.replay.log import answers, engine_for
    from threadline.inspector.app import mount
    from threadline.server.app import create_app

    running: list[tuple[LiveServer, SQLiteStore]] = []

    def start(require_tokens: bool = False, model: ScriptedModel | None = None) -> Served:
        store = world.open()
        model = model or ScriptedModel(default=answers)
        engine = engine_for(store, model)
        app = create_app(engine, require_tokens=require_tokens)
        mount(app, engine)
        server = LiveServer(app)
        url = server.__enter__()
        running.append((server, store))
        return Served(url, store, engine, model)

    yield start
    for server, store in running:
        server.__exit__()
        store.close()


# -- the browser ------------------------------------------------------------------------------

def _browser_required() -> bool:
    return os.environ.get("THREADLINE_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """Debian's Chromium, headless, with an empty profile of its own, for the whole session."""
    if _browser_required():
        from playwright.sync_api import sync_playwright
        assert Path(CHROMIUM).exists(), "install Chromium: scripts/bootstrap browser"
    else:
        sync_playwright = pytest.importorskip(
            "playwright.sync_api", reason="install the browser extra: scripts/bootstrap "
                                          "browser").sync_playwright
        if not Path(CHROMIUM).exists():
            pytest.skip("Debian's chromium is not installed: scripts/bootstrap browser")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900})
        yield context
        context.close()


@pytest.fixture
def page(browser_context: BrowserContext) -> Iterator[Page]:
    browser_context.clear_cookies()
    tab = browser_context.new_page()
    tab.set_default_timeout(10_000)
    yield tab
    tab.close()


def artefacts_dir(base: Path | None = None) -> Path:
    where = os.environ.get("THREADLINE_ARTEFACTS")
    folder = Path(where) if where else (base or Path.cwd()) / "inspector-artefacts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


_SAVED: list[Path] = []


@pytest.fixture
def screenshot(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Page, str], Path]:
    """``screenshot(page, name)``: the whole page as ``NAME.png`` in the artefacts folder."""
    folder = artefacts_dir(tmp_path_factory.getbasetemp())

    def take(tab: Page, name: str) -> Path:
        path = folder / f"{name}.png"
        tab.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 1000, "the screenshot is empty"
        _SAVED.append(path)
        return path
    return take


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _SAVED:
        terminalreporter.write_line(f"inspector screenshots ({len(_SAVED)}) saved in "
                                    f"{_SAVED[0].parent}")
