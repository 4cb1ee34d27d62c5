"""The charts: a conversation's reuse and cost per turn, and the per-turn-index curves of
``threadline stats`` at ``/ui/stats``, drawn as SVG on the server with a title, a description
and labelled axes, each mark carrying its exact figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from tests.inspector._dom import Element, parse
from tests.inspector._views_app import World, client, tokens
from threadline.cache.pricing import profile
from threadline.cli import cli
from threadline.inspector.charts import (
    DEFAULT_INPUT_PRICE,
    DEFAULT_PROFILE,
    conversation_chart,
    conversation_samples,
)
from threadline.items import utc_now
from threadline.stats import TurnSample, curves, turn_samples
from threadline.stores.tokens import TokenRole, issue


def accessible(svg: Element) -> tuple[str, str]:
    """The chart's name and description, as its aria-labelledby points at them."""
    assert svg.attrs["role"] == "img"
    title_id, desc_id = svg.attrs["aria-labelledby"].split()
    title, desc = svg.by_id(title_id), svg.by_id(desc_id)
    assert (title.tag, desc.tag) == ("title", "desc")
    assert title.text and desc.text
    labels = [t.text for t in svg.find_all("text", class_="axis-label")]
    assert len(labels) == 2 and all(labels)
    return title.text, desc.text


def test_a_conversation_chart_draws_each_turns_reuse_and_cost(world: World) -> None:
    samples = conversation_samples(world.store, world.ann_cid)
    assert [s.turn for s in samples] == [1, 2, 3, 4, 5, 6]
    expected = [s for s in turn_samples(world.store, profile=profile(DEFAULT_PROFILE),
                                        input_price=DEFAULT_INPUT_PRICE,
                                        conversations=[world.ann_cid]) if s.branch == "main"]
    assert sorted(expected, key=lambda s: s.turn) == samples
    figure = parse(str(conversation_chart(samples)))
    reuse, cost = figure.find_all("svg")
    assert accessible(reuse)[0] == "Reuse per turn, branch main"
    assert accessible(cost)[0] == "Cost per turn, branch main"
    assert [float(r.attrs["data-value"]) for r in reuse.find_all("rect")] == [
        s.reuse_ratio for s in samples]
    assert [float(r.attrs["data-value"]) for r in cost.find_all("rect")] == [
        s.cost_usd for s in samples]
    assert [r.attrs["data-label"] for r in cost.find_all("rect")] == [
        str(s.turn) for s in samples]
    assert [t.text for t in cost.find_all("text", class_="axis-label")] == ["turn", "USD"]
    # the bars' heights follow the values: the highest cost is the tallest bar
    heights = [float(r.attrs["height"]) for r in cost.find_all("rect")]
    assert heights.index(max(heights)) == max(range(len(samples)),
                                              key=lambda i: samples[i].cost_usd)


def test_a_long_conversation_is_drawn_in_bins_and_says_so() -> None:
    samples = [TurnSample("c", "main", n, 10.0, 100, n % 100, 0.001 * n)
               for n in range(1, 1001)]
    figure = parse(str(conversation_chart(samples, max_bars=100, id_prefix="long")))
    reuse, _ = figure.find_all("svg")
    bars = reuse.find_all("rect")
    assert len(bars) == 100
    assert bars[0].attrs["data-label"] == "1-10"
    assert float(bars[0].attrs["data-value"]) == pytest.approx(
        sum(s.reuse_ratio or 0 for s in samples[:10]) / 10)
    assert "mean of 10 consecutive turns" in accessible(reuse)[1]
    assert reuse.attrs["id"] == "long-reuse"


def test_a_conversation_without_calls_says_there_is_nothing_to_chart() -> None:
    assert "nothing to chart" in str(conversation_chart([]))


def test_the_stats_page_draws_the_curves_threadline_stats_prints(
        world: World, ui: TestClient, tmp_path: Path) -> None:
    response = ui.get("/ui/stats")
    assert response.status_code == 200
    page = parse(response.text)
    printed = CliRunner().invoke(cli, ["stats", "--json"], catch_exceptions=False,
                                 env={"THREADLINE_HOME": str(tmp_path)})
    points = json.loads(printed.stdout)["points"]
    charts = {svg.attrs["id"]: svg for svg in page.find_all("svg")}
    assert set(charts) == {"stats-ttft_ms", "stats-reuse_ratio", "stats-prompt_tokens",
                           "stats-cost_usd"}
    for metric, svg in charts.items():
        name = metric.removeprefix("stats-")
        accessible(svg)
        medians = [c for c in svg.find_all("circle")
                   if c in svg.find("g", data_series="median").iter()]
        assert [(c.attrs["data-label"], float(c.attrs["data-value"])) for c in medians] == [
            (p["turn"], p[name]["median"]) for p in points if p[name]["median"] is not None]
    rows = page.by_id("stats-table").find_all("tr", data_turn=points[0]["turn"])
    assert rows and rows[0].find("td").text == str(points[0]["turns"])
    assert f"{json.loads(printed.stdout)['turns']} turns" in page.by_id("main").text


def test_a_user_token_charts_only_its_own_conversations(world: World) -> None:
    bearer = tokens(world.store)
    ui = client(world)
    page = parse(ui.get("/ui/stats", headers={"Authorization": bearer["bob"]}).text)
    bobs = curves(turn_samples(world.store, profile=profile(DEFAULT_PROFILE),
                               input_price=DEFAULT_INPUT_PRICE,
                               conversations=[world.bob_cid]))
    assert "1 turn in 1 conversation" in page.by_id("main").text
    assert [r.attrs["data-turn"] for r in page.by_id("stats-table").find_all("tr")
            if "data-turn" in r.attrs] == [p.label for p in bobs]
    # a user with no conversation sees none, not everyone's
    nobody = issue_for(world, "nobody")
    page = parse(ui.get("/ui/stats", headers={"Authorization": nobody}).text)
    assert "0 turns in 0 conversations" in page.by_id("main").text
    assert not page.find_all("svg")


def issue_for(world: World, user: str) -> str:
    assert world.store.tokens is not None
    return "Bearer " + issue(world.store.tokens, role=TokenRole.USER, user_id=user, name=None,
                             at=utc_now())[1]


@pytest.mark.parametrize("params, said", [
    ({"group": "weekly"}, "unknown grouping"),
    ({"since": "last tuesday"}, "--since 'last tuesday'"),
    ({"profile": "nosuch"}, "unknown cache profile"),
])
def test_bad_stats_options_are_refused_with_what_to_do(ui: TestClient, params: dict[str, str],
                                                      said: str) -> None:
    refused = ui.get("/ui/stats", params=params)
    assert refused.status_code == 400
    assert said in refused.json()["error"]["message"]


def test_a_conversation_page_links_its_charts_and_they_are_its_owners_alone(
        world: World, ui: TestClient) -> None:
    page = parse(ui.get(f"/ui/c/{world.ann_cid}").text)
    link = page.by_id("charts-link")
    assert link.attrs["href"] == f"/ui/c/{world.ann_cid}/charts?branch=main"
    charts = parse(ui.get(link.attrs["href"]).text)
    reuse, cost = charts.by_id("conversation-charts").find_all("svg")
    samples = conversation_samples(world.store, world.ann_cid)
    assert [float(r.attrs["data-value"]) for r in cost.find_all("rect")] == [
        s.cost_usd for s in samples]
    assert accessible(reuse)[0] == "Reuse per turn, branch main"
    fork = ui.get(f"/ui/c/{world.ann_cid}/charts?branch={world.fork}")
    assert fork.status_code == 200 and f"Reuse per turn, branch {world.fork}" in fork.text
    assert ui.get(f"/ui/c/{world.ann_cid}/charts?branch=nope").status_code == 404
    bearer = tokens(world.store)
    assert ui.get(f"/ui/c/{world.ann_cid}/charts",
                  headers={"Authorization": bearer["bob"]}).status_code == 403
    assert ui.get(f"/ui/c/{world.ann_cid}/charts",
                  headers={"Authorization": bearer["ann"]}).status_code == 200
