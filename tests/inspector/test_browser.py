"""Views 1 and 2 in a real browser (Debian's Chromium, headless, through Playwright) on the
fixture store: what the DOM shows against what the store recorded, signing in, refusals,
keyboard navigation, a running turn streaming in, and a screenshot of each view."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from tests.inspector.conftest import ANN_TITLE, BOB_TITLE, OPS_TITLE, ServeFactory, World
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel

if TYPE_CHECKING:
    from playwright.sync_api import Page

Shot = Callable[["Page", str], Path]


def titles(page: Page) -> list[str]:
    return page.locator("table.conversations tbody tr td:first-child a").all_inner_texts()


def sign_in(page: Page, url: str, secret: str) -> None:
    page.goto(f"{url}/ui/login")
    page.fill("#token", secret)
    page.click("form.login button")
    page.wait_for_url(f"{url}/ui")


def test_the_conversations_view_searches_sorts_and_pages(
        serve: ServeFactory, page: Page, screenshot: Shot) -> None:
    url = serve().url
    page.goto(f"{url}/ui")
    assert titles(page) == [OPS_TITLE, BOB_TITLE, ANN_TITLE]  # newest activity first
    ann = page.locator("tr[data-conversation='c_ann']")
    assert ann.locator(".owner").inner_text() == "ann"
    assert ann.locator(".branches").inner_text() == "3"
    assert ann.locator(".cost").inner_text().startswith("$")
    screenshot(page, "view1-conversations")

    page.select_option("select[name=sort]", "oldest")
    page.click("form.search button")
    assert titles(page) == [ANN_TITLE, BOB_TITLE, OPS_TITLE]
    page.fill("input[name=q]", "ROSES")  # in a message, any case
    page.select_option("select[name=sort]", "recent")
    page.click("form.search button")
    assert titles(page) == [BOB_TITLE]
    page.goto(f"{url}/ui?title=lisbon")
    assert titles(page) == [ANN_TITLE]
    page.goto(f"{url}/ui?user=bob")
    assert titles(page) == [BOB_TITLE]

    page.goto(f"{url}/ui?limit=2")
    assert titles(page) == [OPS_TITLE, BOB_TITLE]
    page.click("a[rel=next]")
    assert titles(page) == [ANN_TITLE]
    assert page.locator("a[rel=next]").count() == 0
    page.click("a[rel=prev]")
    assert titles(page) == [OPS_TITLE, BOB_TITLE]


def test_the_conversation_view_shows_what_the_store_recorded(
        serve: ServeFactory, world: World, page: Page, screenshot: Shot) -> None:
    served = serve()
    store = served.store
    page.goto(f"{served.url}/ui/c/{world.ann}")
    # the tree: main with the regenerate forked from it; the edit of the first message
    # grows from before it, so it is a root of its own
    main = page.locator(".tree li[data-branch=main]")
    assert main.get_attribute("data-kind") == "main"
    assert [(li.get_attribute("data-branch"), li.get_attribute("data-kind"))
            for li in main.locator("li").all()] == [("b2", "regenerate")]
    roots = page.locator(".tree > ul > li")
    assert [(li.get_attribute("data-branch"), li.get_attribute("data-kind"))
            for li in roots.all()] == [("main", "main"), ("b3", "edit")]
    assert page.locator(".tree a[aria-current=page]").inner_text() == "main"

    # each bar's reused share is the cached tokens its calls recorded
    calls = [c for c in store.calls(world.ann, branch="main") if c.purpose == "turn"]
    turns = page.locator("li.turn")
    assert turns.count() == max(c.turn for c in calls)
    checked = 0
    for turn in turns.all():
        number = int(turn.get_attribute("data-turn") or 0)
        own = [c for c in calls if c.turn == number]
        bar = turn.locator(".bar")
        if not own:
            assert bar.count() == 0
            continue
        assert int(bar.get_attribute("data-reused") or -1) == sum(
            c.usage.cached_tokens for c in own)
        assert int(bar.get_attribute("data-prompt") or -1) == sum(
            c.usage.prompt_tokens for c in own)
        widths = bar.evaluate("b => [b.getBoundingClientRect().width, "
                              "b.querySelector('.reused').getBoundingClientRect().width]")
        prompt = sum(c.usage.prompt_tokens for c in own)
        assert abs(widths[1] / widths[0] - sum(c.usage.cached_tokens for c in own) / prompt) \
            < 0.01
        for call in turn.locator("a[data-call]").all():
            assert call.get_attribute("href") == f"/ui/calls/{call.get_attribute('data-call')}"
        checked += 1
    assert checked >= 10

    # the compaction: marked in its turn, with the constraints it pinned, verbatim
    compaction = next(i for i in store.history(world.ann) if i.kind is ItemKind.COMPACTION)
    marker = page.locator(f".compaction[data-seq='{compaction.seq}']")
    assert marker.locator("xpath=ancestor::li[contains(@class,'turn')]").get_attribute(
        "data-turn") == str(compaction.turn)
    pinned = [store.item(world.ann, s).content["text"] for s in compaction.content["pinned"]]
    assert pinned and marker.locator("ul.kept li").all_inner_texts() == pinned
    estimate = compaction.content["estimate"]
    tokens = marker.locator(".tokens")
    assert (tokens.get_attribute("data-before"), tokens.get_attribute("data-after")) == \
        (str(estimate["tokens_before"]), str(estimate["tokens_after"]))
    assert "Always use British spelling." in page.locator(".constraints").inner_text()
    screenshot(page, "view2-conversation")

    # switching branches: the edit shows its own first message
    page.click(".tree li[data-branch=b3] > a")
    page.wait_for_url(re.compile(r"branch=b3"))
    assert page.locator(".tree a[aria-current=page]").inner_text() == "b3"
    first = page.locator("li.turn").first.locator(".message.user").inner_text()
    assert "Hello again, from Oslo." in first


def test_the_timeline_pages_through_whole_turns(serve: ServeFactory, world: World,
                                                page: Page) -> None:
    url = serve().url
    page.goto(f"{url}/ui/c/{world.ann}?turns=5")

    def numbers() -> list[int]:
        return [int(n) for n in page.locator("li.turn").evaluate_all(
            "els => els.map(e => e.dataset.turn)")]
    newest = numbers()
    assert len(newest) == 5 and newest == sorted(newest)
    seen, older = list(newest), newest
    while page.locator("a[rel=prev]").count():
        page.locator("a[rel=prev]").first.click()
        older = numbers()
        assert older and older[-1] == seen[0] - 1  # contiguous, no overlap
        seen = older + seen
    assert seen == list(range(1, seen[-1] + 1))
    page.locator("a[rel=next]").first.click()  # and back: the turns right after the oldest
    assert numbers() == list(range(older[-1] + 1, older[-1] + 6))


def test_a_user_token_sees_only_its_own(serve: ServeFactory, world: World, page: Page) -> None:
    secrets = world.tokens()
    url = serve().url
    sign_in(page, url, secrets["ann"])
    assert titles(page) == [ANN_TITLE]
    assert page.locator("header .who span").inner_text() == "ann"
    response = page.goto(f"{url}/ui/c/{world.bob}")
    assert response is not None and response.status == 403
    assert BOB_TITLE not in page.content() and "roses" not in page.content().lower()
    response = page.goto(f"{url}/ui?user=bob")
    assert response is not None and response.status == 403
    page.click("header .who button")  # sign out
    page.wait_for_url(re.compile(r"/ui/login"))
    page.goto(f"{url}/ui")
    assert "/ui/login" in page.url


def test_without_a_token_a_required_service_shows_no_data(
        serve: ServeFactory, world: World, page: Page, screenshot: Shot) -> None:
    secrets = world.tokens()
    url = serve(require_tokens=True).url
    page.goto(f"{url}/ui/c/{world.ann}")
    assert page.url.startswith(f"{url}/ui/login?next=")
    assert ANN_TITLE not in page.content() and page.locator("#token").count() == 1
    page.fill("#token", "tl_not-a-token")
    page.click("form.login button")
    assert "not one this service issued" in page.locator(".error").inner_text()
    screenshot(page, "login-refused")
    page.fill("#token", secrets["admin"])
    page.click("form.login button")
    page.wait_for_url(f"{url}/ui/c/{world.ann}")  # back where it was going
    assert page.locator("h1").inner_text() == ANN_TITLE


FORGE = """([target, token]) => { const f = document.createElement('form');
    f.method = 'post'; f.action = target;
    const i = document.createElement('input'); i.name = 'token'; i.value = token;
    f.append(i); document.body.append(f); f.submit(); }"""


def test_a_cross_site_post_is_refused(serve: ServeFactory, world: World, page: Page) -> None:
    url = serve().url  # open: no token needed, so only the origin check stands in the way
    other = url.replace("127.0.0.1", "localhost")  # another origin (and site), same server
    page.goto(f"{other}/ui/login")
    with page.expect_response(f"{url}/ui/login") as answer:
        page.evaluate(FORGE, [f"{url}/ui/login", "tl_forged"])
    page.wait_for_url(f"{url}/ui/login")
    assert answer.value.status == 403
    assert "may not change anything" in page.locator(".error").inner_text()
    assert not [c for c in page.context.cookies() if c["name"] == "threadline_token"]


def test_the_login_cookie_stays_on_its_own_site(serve: ServeFactory, world: World,
                                                page: Page) -> None:
    secrets = world.tokens()
    url = serve().url
    sign_in(page, url, secrets["admin"])
    cookie = next(c for c in page.context.cookies() if c["name"] == "threadline_token")
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/ui")
    other = url.replace("127.0.0.1", "localhost")
    page.goto(f"{other}/ui/login")
    with page.expect_response(f"{url}/ui/logout") as answer:
        page.evaluate(FORGE, [f"{url}/ui/logout", ""])
    page.wait_for_url(f"{url}/ui/logout")
    assert answer.value.status in (401, 403)  # no cookie came along, and no same origin
    page.goto(f"{url}/ui")  # still signed in: the forged logout changed nothing
    assert titles(page) == [OPS_TITLE, BOB_TITLE, ANN_TITLE]
    assert page.evaluate("document.cookie") == ""  # HttpOnly: scripts cannot read it


def test_keyboard_navigation_reaches_and_follows_the_links(
        serve: ServeFactory, world: World, page: Page) -> None:
    url = serve().url
    page.goto(f"{url}/ui")
    reached = []
    for _ in range(30):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.textContent.trim()"))
        if reached[-1] == ANN_TITLE:
            break
    assert reached[0] == "Skip to content" and reached[-1] == ANN_TITLE, reached
    page.keyboard.press("Enter")
    page.wait_for_url(f"{url}/ui/c/{world.ann}")
    for _ in range(40):  # on to the branch tree
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent.trim()") == "b2":
            break
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"branch=b2"))


def test_a_running_turn_streams_into_the_page(serve: ServeFactory, world: World,
                                              page: Page, screenshot: Shot) -> None:
    served = serve(model=ScriptedModel(token_delay_s=0.05))
    reply = "one two three four five six seven eight nine ten eleven twelve"
    served.model.enqueue(reply)
    done: list[dict[str, object]] = []

    def send() -> None:
        with httpx.stream("POST", f"{served.url}/v1/conversations/{world.bob}/messages",
                          json={"text": "And lilies?", "stream": True}, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: ") and '"turn"' in line:
                    done.append(json.loads(line[6:]))
    sender = threading.Thread(target=send)
    sender.start()
    try:
        for _ in range(200):  # until the turn holds the lease and has streamed a little
            page.goto(f"{served.url}/ui/c/{world.bob}")
            if page.locator("#running").count():
                break
        running = page.locator("#running")
        assert running.count() == 1
        page.wait_for_function("document.getElementById('running').dataset.finished",
                               timeout=20_000)
        assert running.get_attribute("data-finished") == "done"
        assert int(running.get_attribute("data-received") or 0) >= 1
        assert running.locator(".live").inner_text().strip().endswith("twelve")
        screenshot(page, "view2-streaming")
    finally:
        sender.join(timeout=30)
    page.reload()
    assert page.locator("#running").count() == 0
    assert reply in page.locator("li.turn").last.inner_text()
