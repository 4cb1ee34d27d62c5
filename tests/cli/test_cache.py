from __future__ import annotations

from tests.cli.conftest import Invoke


def test_cache_report_lists_every_call_with_its_cause(tl: Invoke) -> None:
    cid = tl("chat", "--once", "hello", "--json").json()["conversation_id"]
    run = tl("chat", "--conversation", cid, input="two\nthree\n")
    assert run.code == 0
    tl("conversations", "fork", cid, "--from", "3")
    tl("chat", "--once", "alternative", "--conversation", cid, "--branch", "b2")
    body = tl("cache", "report", cid, "--json").json()
    causes = [(c["turn"], c["branch"], c["cause"]) for c in body["calls"]]
    assert causes == [(1, "main", "first_call"), (2, "main", "append_only"),
                      (3, "main", "append_only"), (3, "b2", "fork")]
    second = body["calls"][1]
    assert second["reused_tokens"] > 0 and not second["reuse_estimated"]
    assert second["ratio"] == second["best_ratio"] and body["unexpected_misses"] == 0
    assert body["cost_usd"] <= body["uncached_cost_usd"]
    human = tl("cache", "report", cid)
    assert human.code == 0 and "CAUSE" in human.out and "█" in human.out
    assert "0 unexpected misses" in human.out


def test_cache_report_refuses_unknown_input(tl: Invoke) -> None:
    assert tl("cache", "report", "c_missing").code == 3
    cid = tl("chat", "--once", "hello", "--json").json()["conversation_id"]
    run = tl("cache", "report", cid, "--profile", "nope")
    assert run.code == 2 and "unknown cache profile" in run.err
