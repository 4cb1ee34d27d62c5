"""``threadline eval locomo``: recall against a last-N window and the full conversation, on a
small file in LoCoMo's format written here (the real data is for benchmarks only)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Invoke


def _session(n: int, turns: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"speaker": who, "dia_id": f"D{n}:{i + 1}", "text": text}
            for i, (who, text) in enumerate(turns)]


def _sample() -> dict[str, Any]:
    filler = [("Ann", "Haha, sounds fun!"), ("Bob", "Yes indeed, talk soon.")] * 12
    return {"sample_id": "tiny", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": _session(1, [("Ann", "I adopted a greyhound called Pepper last week."),
                                  ("Bob", "I started pottery classes at the community "
                                          "centre."), *filler]),
        "session_2_date_time": "10:00 am on 2 June, 2023",
        "session_2": _session(2, [("Ann", "My pottery? No, I only paint watercolours."),
                                  *filler]),
    }, "qa": [
        {"question": "What is the name of Ann's greyhound?", "answer": "Pepper",
         "evidence": ["D1:1"], "category": 4},
        {"question": "Where does Bob take pottery classes?", "answer": "community centre",
         "evidence": ["D1:2"], "category": 4},
        {"question": "What did Ann realize at her marathon?", "evidence": ["D2:1"],
         "category": 5, "adversarial_answer": "x"},
    ]}


def test_eval_locomo_reports_each_arm(tl: Invoke, tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([_sample()]))
    run = tl("eval", "locomo", str(data), "--k", "3", "--k", "10", "--window", "10",
             "--arms", "all,rules", "--json")
    assert run.code == 0, run.err
    report = run.json()
    assert report["split"]["test"] == ["tiny"] and report["split"]["dev"] == []
    arms = {name: arm["test"] for name, arm in report["arms"].items()}
    assert report["questions"] == 3 and report["turns"] == 51
    assert set(arms) == {"threadline", "rules", "last_n", "full"}
    assert report["threadline"]["steps"] == "turns+rerank+time+context+learned+beside"
    assert arms["threadline"]["recall@3"] == 1.0  # both facts' turns recalled
    assert arms["threadline"]["by_category"]["single-hop"] == {
        "questions": 2, "recall@3": 1.0, "recall@10": 1.0}
    assert arms["last_n"]["recall@10"] == 0.0      # both are too old for it
    assert arms["full"]["recall@10"] == 1.0
    assert arms["full"]["tokens_vs_full@10"] == 1.0
    assert 0 < arms["threadline"]["tokens_vs_full@3"] <= \
        arms["threadline"]["tokens_vs_full@10"] < arms["last_n"]["tokens_vs_full@10"] < 1
    assert arms["threadline"]["adversarial_abstained"] == 1.0  # no marathon was mentioned
    assert arms["full"]["adversarial_abstained"] == 0.0
    latency = report["arms"]["threadline"]["latency"]
    assert latency["p50_ratio"] is not None and latency["p99_ratio"] is not None
    assert set(latency["stages_p50_ms"]) == {"lexical", "context", "rerank", "beside"}
    assert report["rewrite_hop"]["questions_changed"] == 0  # standalone questions
    # values changed after the conversation: the current one recalled, the old one history
    assert report["knowledge_updates"]["injected_probes"] == {
        "changed": 6, "current_recalled": 6, "stale_recalled": 0, "kept_as_history": 6,
        "withdrawn": 2, "withdrawn_recalled": 0}
    human = tl("eval", "locomo", str(data))
    assert human.code == 0 and "threadline" in human.out and "last_n" in human.out
    assert "single-hop" in human.out and "split:" in human.out
    # the dev split is LoCoMo's first two conversations: this file has none
    dev = tl("eval", "locomo", str(data), "--split", "dev")
    assert dev.code != 0 and "no dev samples" in dev.err


@pytest.mark.parametrize(("arms", "message"), [
    ("all,turns+magic", "unknown recall step 'magic'"), (",", "names no way to recall")])
def test_eval_locomo_refuses_an_unknown_arm(tl: Invoke, tmp_path: Path, arms: str,
                                            message: str) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([_sample()]))
    run = tl("eval", "locomo", str(data), "--arms", arms)
    assert run.code != 0 and message in run.err


def test_arms_name_the_learned_rerank_as_a_step() -> None:
    from threadline.eval.locomo import ArmSpec

    everything = ArmSpec.parse("all+dense")
    assert everything.name == "turns+rerank+time+context+learned+beside+dense"
    assert everything.dense and everything.steps.learned and everything.steps.context
    assert everything.steps.beside and not ArmSpec.parse("turns+rerank").steps.beside
    before = ArmSpec.parse("turns+rerank+time+context+dense")  # the rerank before the model
    assert not before.steps.learned and before.steps.rerank
    assert ArmSpec.parse("rules").steps == ArmSpec.parse("").steps
    assert not ArmSpec.parse("rules").steps.learned


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "is not JSON"),
    ("[]", "non-empty JSON array"),
    ('[{"conversation": {}, "qa": []}]', "speaker_a and speaker_b"),
    (json.dumps([{**_sample(), "conversation": {**_sample()["conversation"],
                                                "session_1_date_time": "someday"}}]),
     "no readable date"),
])
def test_eval_locomo_refuses_a_file_that_is_not_locomo(tl: Invoke, tmp_path: Path,
                                                       content: str, message: str) -> None:
    data = tmp_path / "bad.json"
    data.write_text(content)
    run = tl("eval", "locomo", str(data))
    assert run.code != 0
    assert message in run.err


def test_memory_recall_shows_what_a_turn_would_be_shown(tl: Invoke) -> None:
    tl("memory", "add", "--user", "ann", "I adopted a greyhound called Pepper")
    tl("memory", "add", "--user", "bob", "I adopted a greyhound called Rex")
    found = tl("memory", "recall", "--user", "ann", "greyhound name?", "--json").json()
    assert [m["text"] for m in found["memories"]] == ["I adopted a greyhound called Pepper"]
    assert 'the user said on' in found["text"]
    nothing = tl("memory", "recall", "--user", "ann", "favourite opera?")
    assert nothing.code == 0
    assert "nothing remembered about the user" in nothing.out


def test_learn_with_a_model_counts_schema_validity(tl: Invoke) -> None:
    sent = tl("chat", "--once", "I live in Oslo.", "--model", "scripted", "--user", "ann",
              "--json")
    assert sent.code == 0, sent.err
    learned = tl("memory", "learn", "--model", "scripted", "--json").json()
    # the scripted model echoes: not JSON, so rejected and counted; the rules still learn
    assert learned["learned_from"] == 1
    assert (learned["model_outputs"], learned["schema_valid"]) == (1, 0)
    assert learned["schema_validity_rate"] == 0.0
    listed = tl("memory", "list", "--user", "ann", "--json").json()
    # the fact, and the turn it was said in (shown for it when recalled)
    listed.sort(key=lambda e: e["kind"])  # both said at once: their order is the ids'
    assert [(e["kind"], e["text"]) for e in listed] == [("fact", "I live in Oslo"),
                                                        ("turn", "I live in Oslo.")]
    again = tl("chat", "--once", "Where do I live?", "--model", "scripted", "--user", "ann",
               "--conversation", sent.json()["conversation_id"], "--json").json()
    [recalled] = again["memory"]["memories"]
    assert recalled["text"] == "I live in Oslo." and recalled["kind"] == "turn"
    assert recalled["related"] == [listed[0]["id"]]
