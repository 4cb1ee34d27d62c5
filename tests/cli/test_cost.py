from __future__ import annotations

from tests.cli.conftest import Invoke


def test_simulate_prints_the_seed_examples(tl: Invoke) -> None:
    section_1 = tl("cost", "simulate", "--turns", "40", "--tokens-per-turn", "2800",
                   "--preamble-tokens", "6000", "--input-price", "5", "--profile", "none",
                   "--json").json()
    assert (section_1["input_tokens_total"], round(section_1["cost_usd"], 2)) == (2_536_000,
                                                                                   12.68)
    plan_b = tl("cost", "simulate", "--turns", "10", "--tokens-per-turn", "2800",
                "--warm-tokens", "118000", "--input-price", "5", "--output-price", "25",
                "--compact-at", "1", "--compact-to", "20000", "--summary-tokens", "3000",
                "--json").json()
    assert round(plan_b["cost_usd"], 2) == 0.60 and len(plan_b["turns"]) == 10
    human = tl("cost", "simulate", "--turns", "40", "--tokens-per-turn", "300",
               "--input-price", "3", "--profile", "ideal")
    assert human.code == 0 and human.out.splitlines()[-1] == (
        "profile ideal: 246,000 input tokens, 0.11 USD")


def test_profiles_are_listed(tl: Invoke) -> None:
    names = [p["name"] for p in tl("cost", "profiles", "--json").json()]
    assert names[:2] == ["none", "anthropic-5m"] and "ideal" in names
    assert tl("cost", "profiles").out.startswith("PROFILE")


def test_bad_scenarios_are_refused(tl: Invoke) -> None:
    run = tl("cost", "simulate", "--turns", "3", "--tokens-per-turn", "10", "--input-price",
             "1", "--compact-at", "2")
    assert run.code == 2 and "go together" in run.err
    run = tl("cost", "simulate", "--turns", "3", "--tokens-per-turn", "10", "--input-price",
             "1", "--profile", "gemini")
    assert run.code == 2 and "unknown cache profile 'gemini'" in run.err
    run = tl("cost", "simulate", "--turns", "0", "--tokens-per-turn", "10", "--input-price", "1")
    assert run.code == 2


def test_replay_compares_assembly_policies(tl: Invoke, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    records = [{"id": f"r{i}", "conversations": [
        {"from": "human", "value": f"Tell me about topic {i}."},
        {"from": "gpt", "value": "It is interesting. " * 40},
        {"from": "human", "value": "More, please."},
        {"from": "gpt", "value": "Certainly. " * 40},
        {"from": "human", "value": "And finally?"}]} for i in range(3)]
    path = tmp_path / "share.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n{broken")
    run = tl("cost", "replay", str(path), "--format", "sharegpt", "--json")
    assert "skipped line 4: not valid JSON" in run.err
    body = run.json()
    assert body["conversations"] == 3 and body["skipped"][0]["where"] == "line 4"
    ours = body["policies"]["threadline"]
    assert {"prompt_tokens", "reused_tokens", "theoretical_reused_tokens",
            "cost_usd"} <= set(ours)
    assert ours["unexplained_misses"] == 0 and ours["reuse_vs_theoretical"] >= 0.99
    assert body["policies"]["timestamp-in-system"]["unexplained_misses"] == 6
    only = tl("cost", "replay", str(path), "--format", "sharegpt", "--policy", "threadline",
              "--limit", "1", "--json").json()
    assert list(only["policies"]) == ["threadline"] and only["conversations"] == 1
    human = tl("cost", "replay", str(path), "--format", "sharegpt")
    assert human.code == 0 and human.out.startswith("POLICY")
