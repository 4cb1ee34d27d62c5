"""The call page on a log with retrieval, a constraint, a compaction and a fork: the request by
segment, the shaded reuse equal to the recorded bytes, the first divergence, the diff against
the previous call, the raw bytes exactly as sent, and who may see them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from tests.inspector._dom import Element, parse
from tests.inspector._views_app import MessagesOnly, World, client, tokens
from threadline.calls import ModelCall, shared_messages
from threadline.cli import cli
from threadline.engine import Engine
from threadline.inspector import call_view
from threadline.inspector.call_view import HISTORY_PAGE, SEGMENTS
from threadline.items import ItemKind, canonical_json
from threadline.models.scripted import ScriptedModel
from threadline.standard import standard_engine
from threadline.stores.base import Store


def page(ui: TestClient, call_id: str, **params: object) -> Element:
    response = ui.get(f"/ui/calls/{call_id}", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    return parse(response.text)


def test_the_shaded_prefix_is_exactly_the_recorded_reused_bytes(world: World,
                                                               ui: TestClient) -> None:
    calls = world.calls() + world.calls(world.bob_cid)
    assert {c.prefix["cause"] for c in calls if c.prefix} >= {
        "first_call", "tail_replaced", "compaction_reset", "fork"}
    for listed in calls:
        call = world.store.call(listed.id)
        assert call.request is not None and call.prefix is not None
        exact = call.request.exact_bytes()
        dom = page(ui, call.id)
        mark = dom.by_id("reused-prefix")
        assert mark.tag == "mark"
        reused = call.prefix["reused_bytes"]
        assert int(mark.attrs["data-reused-bytes"]) == reused
        assert len(mark.text.encode("utf-8")) == reused
        assert mark.text.encode("utf-8") == exact[:reused]
        # and the whole <pre> is the request exactly as sent, shading included
        assert dom.by_id("raw-bytes").text.encode("utf-8") == exact


def test_the_first_divergence_names_its_segment_item_field_and_cause(world: World,
                                                                    ui: TestClient) -> None:
    compacted = world.call_with("compaction_reset")
    box = page(ui, compacted.id).by_id("divergence")
    # the compaction pinned the constraint: the request first differs where it now stands
    assert (box.attrs["data-segment"], box.attrs["data-field"], box.attrs["data-cause"]) == (
        "pinned", "role", "compaction_reset")
    assert box.attrs["data-seq"] == ""  # the pinned block is no one log item
    assert "compaction" in box.text and "pinned" in box.text

    replaced = world.calls()[1]  # turn 2: the first turn's tail gave way to its reply
    dom = page(ui, replaced.id)
    box = dom.by_id("divergence")
    first_user = next(i for i in world.store.history(world.ann_cid) if i.kind is ItemKind.USER)
    assert (box.attrs["data-segment"], box.attrs["data-seq"], box.attrs["data-cause"]) == (
        "history", str(first_user.seq), "tail_replaced")
    index = box.attrs["data-message"]
    # the message it names sits in that segment, marked, and after every reused one
    history = dom.find("details", data_segment="history")
    marked = history.by_id(f"message-{index}")
    assert "diverges-here" in marked.attrs["class"].split()
    assert marked.attrs["data-reuse"] == "diverges"
    assert [m.attrs["data-reuse"] for m in dom.find_all("li", class_="message")
            if int(m.attrs["data-index"]) < int(index)] == ["reused"] * int(index)
    # the page of the conversation that holds the item, scrolled to it
    assert box.find("a", href=f"/ui/c/{world.ann_cid}?branch=main&before={first_user.seq + 1}"
                            f"#seq-{first_user.seq}")

    fork = next(c for c in world.calls() if c.branch == world.fork)
    assert page(ui, fork.id).by_id("divergence").attrs["data-cause"] == "fork"


def test_the_request_is_laid_out_segment_by_segment(world: World, ui: TestClient) -> None:
    compacted = world.store.call(world.call_with("compaction_reset").id)
    dom = page(ui, compacted.id)
    segments = dom.find_all("details", class_="segment")
    assert [s.attrs["data-segment"] for s in segments] == list(SEGMENTS)
    text = {s.attrs["data-segment"]: [m.find("pre", class_="content").text
                                      for m in s.find_all("li", class_="message")]
            for s in segments}
    assert text["system"] == ["You are a travel assistant."]
    assert text["pinned"] == ["Standing instructions:\n- Always answer in one sentence."]
    assert text["summary"][0].startswith("Summary of the conversation so far:")
    assert text["message"] == ["What was the plan again?"]
    # every message of the request, once, in order
    assert compacted.request is not None
    assert [m for seg in text.values() for m in seg] == [
        m["content"] for m in compacted.request.messages]

    searched = world.calls()[1]
    tail = page(ui, searched.id).find("details", data_segment="tail")
    assert "The Lisbon trip is booked for May." in tail.text
    assert page(ui, searched.id).find("details", data_segment="message").find(
        "pre", class_="content").text == "And the hotel?"


def test_the_diff_against_the_previous_call_shows_the_changed_tail(world: World,
                                                                  ui: TestClient) -> None:
    third = world.calls()[2]  # turn 3: the constraint in the tail, no search
    diff = {d.attrs["data-segment"]: d for d in page(ui, third.id).find_all(
        "div", class_="segment-diff")}
    assert diff["system"].attrs["data-status"] == "same"
    tail = diff["tail"]
    assert tail.attrs["data-status"] == "changed"
    removed = [r.text for r in tail.find_all("span", data_op="-")]
    added = [r.text for r in tail.find_all("span", data_op="+")]
    assert any("The Lisbon trip is booked for May." in line for line in removed)
    assert any("Always answer in one sentence." in line for line in added)
    message = diff["message"]
    assert [r.text for r in message.find_all("span", data_op="-")] == ["- And the hotel?"]
    assert [r.text for r in message.find_all("span", data_op="+")][0].startswith(
        "+ Tell me more about day 0")
    # the history grew: the earlier messages are counted, not repeated
    history = diff["history"]
    assert history.attrs["data-status"] == "changed"
    assert history.find("span", data_op="…").text == "… 2 messages the same"


def test_retrieval_turns_show_the_queries_anchors_and_passages_with_their_ids(
        world: World, ui: TestClient) -> None:
    follow_up = world.calls()[1]
    item = next(i for i in world.store.history(world.ann_cid)
                if i.kind is ItemKind.RETRIEVAL and i.turn == follow_up.turn)
    box = page(ui, follow_up.id).find("div", class_="retrieval")
    assert box.find(data_field="raw-query").text == item.content["raw"] == "And the hotel?"
    assert box.find(data_field="rewritten-query").text == item.content["rewritten"]
    assert item.content["rewritten"] != item.content["raw"]
    anchors = [a.text for a in box.find(data_field="anchors").find_all("code")]
    assert anchors == item.content["preserved"]
    shown = [(p.attrs["data-passage-id"], p.find("pre").text)
             for p in box.find_all("li", class_="passage")]
    assert shown == [(p["id"], p["text"]) for p in item.content["passages"]]
    assert shown and all(f"[{pid}]" in box.text for pid, _ in shown)
    # a turn that searched nothing has no such section
    assert not page(ui, world.calls()[2].id).find_all("div", class_="retrieval")


def test_usage_timings_model_and_endpoint_are_shown(world: World, ui: TestClient) -> None:
    call = world.calls()[1]
    dom = page(ui, call.id)
    assert dom.find(data_field="model").text == call.model
    usage = dom.find(data_field="usage").text
    assert f"prompt {call.usage.prompt_tokens} tokens ({call.usage.cached_tokens} cached)" \
        in usage
    assert f"completion {call.usage.completion_tokens}" in usage
    assert f"total {call.timings.total_ms:.1f} ms" in dom.find(data_field="timings").text
    assert "in process" in dom.find(data_field="endpoint").text  # the scripted model


def test_the_raw_route_is_what_calls_show_request_prints(world: World, ui: TestClient,
                                                       tmp_path: Path) -> None:
    call = world.calls()[-1]
    raw = ui.get(f"/ui/calls/{call.id}/raw")
    assert raw.status_code == 200 and raw.headers["content-type"].startswith("text/plain")
    printed = CliRunner().invoke(cli, ["calls", "show", call.id, "--request"],
                                 env={"THREADLINE_HOME": str(tmp_path)},
                                 catch_exceptions=False)
    assert printed.exit_code == 0
    assert raw.content == printed.stdout_bytes == world.store.call(call.id).request.exact_bytes()


def reuse_by_messages(call: ModelCall, store: Store) -> list[str]:
    """Each message's reuse as the messages say it (those the previous request shares, then
    the divergence): what the page's byte positions must agree with."""
    assert call.request is not None and call.prefix is not None
    previous = call.prefix["previous_call_id"]
    shared = 0 if previous is None else shared_messages(store.call(previous).request,
                                                        call.request)
    divergence = (call.prefix["divergence"] or {}).get("message")
    return ["reused" if i < shared else "diverges" if i == divergence else "new"
            for i in range(len(call.request.messages))]


def shown_reuse(dom: Element) -> dict[int, str]:
    return {int(m.attrs["data-index"]): m.attrs["data-reuse"]
            for m in dom.find_all("li", class_="message")}


@pytest.mark.parametrize("model", [ScriptedModel, MessagesOnly],
                         ids=["rendered-prompt", "json-payload"])
def test_a_long_history_is_paginated(world: World, model: type[ScriptedModel]) -> None:
    engine = Engine(world.store, model())
    cid = engine.run_turn("turn 0").conversation_id
    for n in range(1, 160):
        engine.run_turn(f"turn {n}", conversation_id=cid)
    last = world.store.call(world.store.calls(cid)[-1].id)
    assert last.request is not None
    assert (last.request.rendering is None) == (model is MessagesOnly)
    expected = reuse_by_messages(last, world.store)
    ui = client(world)
    dom = page(ui, last.id)
    history = dom.find("details", data_segment="history")
    count = int(history.attrs["data-count"])
    assert count == 318 and count > 3 * HISTORY_PAGE
    shown = [int(m.attrs["data-index"]) for m in history.find_all("li", class_="message")]
    assert shown == list(range(3 * HISTORY_PAGE, count))  # the last page: where it grew
    assert history.find("a", rel="prev")
    for n in (1, 2, 4):  # from the start, the middle, the end of the request
        other = page(ui, last.id, history_page=n)
        history = other.find("details", data_segment="history")
        assert [int(m.attrs["data-index"]) for m in history.find_all(
            "li", class_="message")] == list(range((n - 1) * HISTORY_PAGE,
                                                  min(n * HISTORY_PAGE, count)))
        assert bool(history.find_all("a", rel="next")) == (n < 4)
        assert bool(history.find_all("a", rel="prev")) == (n > 1)
        # each message's place in the bytes agrees with the messages themselves
        assert all(expected[i] == reuse for i, reuse in shown_reuse(other).items())
    assert "reused" in shown_reuse(dom).values() and "new" in shown_reuse(dom).values()
    # the raw bytes stay whole
    assert dom.by_id("raw-bytes").text.encode() == last.request.exact_bytes()
    assert len(dom.by_id("reused-prefix").text.encode()) == last.prefix["reused_bytes"]


def test_json_payloads_are_shaded_and_marked_as_the_record_says(world: World) -> None:
    engine = standard_engine(world.store, MessagesOnly(), system="Be brief.")
    first = engine.run_turn("Hello there.")
    for text in ("And then?", "Ünïcödé, and emoji 🚲 too."):
        engine.run_turn(text, conversation_id=first.conversation_id)
    engine.regenerate(first.conversation_id, first.message.seq)
    ui = client(world)
    for listed in world.store.calls(first.conversation_id):
        call = world.store.call(listed.id)
        assert call.request is not None and call.request.rendering is None
        dom = page(ui, call.id)
        mark = dom.by_id("reused-prefix")
        assert mark.text.encode() == call.request.exact_bytes()[:call.prefix["reused_bytes"]]
        assert dom.by_id("raw-bytes").text.encode() == call.request.exact_bytes()
        assert list(shown_reuse(dom).values()) == reuse_by_messages(call, world.store)
        # found where the serialisation put them, from either end, not by comparing
        text, messages = call.request.payload_json(), call.request.messages
        n = len(messages)
        for wanted in (range(n), range(n - 1, n), range(1, n), [0, n - 1]):
            spans = call_view.message_spans(call.request, text, list(wanted))
            assert spans is not None and sorted(spans) == sorted(wanted)
            assert all(text[a:b] == canonical_json(messages[i]) for i, (a, b) in spans.items())


def test_a_template_that_hides_the_messages_falls_back_to_comparing_them(
        world: World, ui: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(call_view, "message_spans", lambda *args: None)
    for listed in world.calls():
        call = world.store.call(listed.id)
        assert list(shown_reuse(page(ui, call.id)).values()) == \
            reuse_by_messages(call, world.store)


def test_a_large_previous_request_puts_the_diff_on_its_own_page(
        world: World, ui: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    third = world.calls()[2]
    inline = page(ui, third.id).find_all("div", class_="segment-diff")
    monkeypatch.setattr(call_view, "DIFF_INLINE_BYTES", 10)
    dom = page(ui, third.id)
    assert not dom.find_all("div", class_="segment-diff")
    link = dom.by_id("diff-link")
    apart = parse(ui.get(link.attrs["href"]).text)
    assert [d.text for d in apart.find_all("div", class_="segment-diff")] == \
        [d.text for d in inline]
    # the page still marks each message from the bytes alone
    assert list(shown_reuse(dom).values()) == reuse_by_messages(
        world.store.call(third.id), world.store)
    first = world.calls()[0]
    assert "No earlier call" in parse(ui.get(f"/ui/calls/{first.id}/diff").text).by_id(
        "diff").text


def test_a_user_token_sees_only_its_own_calls(world: World) -> None:
    bearer = tokens(world.store)
    ui = client(world)
    ann_call, bob_call = world.calls()[0].id, world.calls(world.bob_cid)[0].id
    assert ui.get(f"/ui/calls/{ann_call}", headers={"Authorization": bearer["ann"]}
                  ).status_code == 200
    for path in (f"/ui/calls/{bob_call}", f"/ui/calls/{bob_call}/raw",
                 f"/ui/calls/{bob_call}/diff"):
        refused = ui.get(path, headers={"Authorization": bearer["ann"]})
        assert refused.status_code == 403, path
        assert bob_call in refused.json()["error"]["message"]
        assert world.bob_cid not in refused.text  # the refusal names only what was asked
    assert ui.get(f"/ui/calls/{bob_call}", headers={"Authorization": bearer["admin"]}
                  ).status_code == 200
    assert ui.get("/ui/calls/call_nosuch", headers={"Authorization": bearer["ann"]}
                  ).status_code == 404
    assert ui.get(f"/ui/calls/{ann_call}").status_code == 401  # tokens exist: one is needed


def test_a_bad_page_number_is_refused(world: World, ui: TestClient) -> None:
    refused = ui.get(f"/ui/calls/{world.calls()[0].id}", params={"history_page": 0})
    assert refused.status_code == 422
