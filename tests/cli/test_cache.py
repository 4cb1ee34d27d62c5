from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from threadline.engine import Engine
from threadline.errors import ModelCallFailed
from threadline.models.scripted import ScriptedModel, render_chatml
from threadline.stores.sqlite import SQLiteStore


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


def test_a_failed_call_and_its_retry_are_no_unexpected_miss(tl: Invoke, home: Path) -> None:
    home.mkdir(parents=True)
    model = ScriptedModel()
    store = SQLiteStore(home / "threadline.db")
    engine = Engine(store, model)
    cid = engine.run_turn("hello").conversation_id
    model.enqueue(RuntimeError("the server went away"))  # before any payload is recorded
    with pytest.raises(ModelCallFailed):
        engine.run_turn("are you there?", conversation_id=cid)
    retry = engine.answer(cid).call
    store.close()
    assert retry is not None
    body = tl("cache", "report", cid, "--json").json()
    assert [(c["status"], c["cause"]) for c in body["calls"]] == [
        ("ok", "first_call"), ("failed", "append_only"), ("ok", "append_only")]
    assert body["unexpected_misses"] == 0 and body["calls"][2]["ratio"] > 0
    assert "0 unexpected misses" in tl("cache", "report", cid).out
    listed = tl("calls", "list", cid, "--json").json()
    assert [c["prefix"]["previous_call_id"] for c in listed][1:] == [listed[0]["call_id"]] * 2
    shown = tl("calls", "show", retry.id, "--request")
    assert shown.code == 0 and shown.out == render_chatml(model.requests[-1])


def test_cache_report_refuses_unknown_input(tl: Invoke) -> None:
    assert tl("cache", "report", "c_missing").code == 3
    cid = tl("chat", "--once", "hello", "--json").json()["conversation_id"]
    run = tl("cache", "report", cid, "--profile", "nope")
    assert run.code == 2 and "unknown cache profile" in run.err


def test_cache_diagnose_names_the_pattern(tl: Invoke, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    lines, history = [], []
    for n in range(1, 5):
        history.append({"role": "user", "content": f"q{n}"})
        lines.append(json.dumps({"model": "m", "messages": [
            {"role": "system", "content": f"Request id 7f3a9c1e{n:04d}b2d4. Be brief."},
            *history]}))
        history.append({"role": "assistant", "content": f"a{n}"})
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines))
    body = tl("cache", "diagnose", str(log), "--json").json()
    assert [(f["kind"], f["turn"]) for f in body["findings"]] == [("volatile_header", 2)]
    assert "request id" in body["findings"][0]["detail"] and len(body["turns"]) == 4
    human = tl("cache", "diagnose", str(log))
    assert human.code == 0 and "volatile_header (from turn 2)" in human.out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\nnot json\n')
    run = tl("cache", "diagnose", str(bad))
    assert run.code == 2 and "line 2 is not JSON" in run.err


def test_kv_snapshots_are_listed_and_cleared_only_when_confirmed(tl: Invoke, home: Path) -> None:
    from threadline.models.kv import Identity, KVCache, Snapshot

    identity = Identity("model.gguf:1:abc", 4096, "1/1", "test")
    cache = KVCache(identity, memory_bytes=0, folder=home / "kv", disk_bytes=1 << 20)
    for n in range(3):
        cache.keep(Snapshot(identity, tuple(range(n * 100, n * 100 + 64)), b"s" * 500))
    cache.flush()
    stats = tl("cache", "stats", "--json")
    assert stats.code == 0, stats.err
    [model] = stats.json()["models"]
    assert (model["model"], model["snapshots"]) == ("model.gguf:1:abc", 3)
    assert stats.json()["bytes"] == model["bytes"] > 1500
    refused = tl("cache", "clear")  # standard input is not a terminal
    assert refused.code == 2 and "pass --yes" in refused.err
    assert tl("cache", "stats", "--json").json()["models"][0]["snapshots"] == 3
    cleared = tl("cache", "clear", "--yes", "--json")
    assert cleared.code == 0 and cleared.json()["deleted"] == 3
    assert tl("cache", "stats", "--json").json()["models"][0]["snapshots"] == 0
