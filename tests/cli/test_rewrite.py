"""``threadline rewrite`` and ``threadline eval canard``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Invoke, snapshot

CANARD = [
    {"History": ["Frank Zappa", "Disbandment"], "Question": "Why did Frank Zappa disband it?",
     "Rewrite": "Why did Frank Zappa disband it?"},
    {"History": ["Frank Zappa", "Disbandment", "What group disbanded?",
                 "Zappa and the Mothers of Invention"],
     "Question": "When did they disband?",
     "Rewrite": "When did Zappa and the Mothers of Invention disband?"},
    {"History": ["Nina Simone", "Later life", "What happened in 1974?",
                 "She recorded her last album for RCA."],
     "Question": "Where was she a student?", "Rewrite": "Where was Nina Simone a student?"},
]


def _conversation(tl: Invoke) -> str:
    first = tl("chat", "--once", "What was Company Y's cloud revenue in FY2025 in ITEM 1B?",
               "--json")
    assert first.code == 0, first.err
    cid: str = first.json()["conversation_id"]
    return cid


def test_rewrite_prints_the_standalone_query_and_how_it_was_chosen(tl: Invoke) -> None:
    cid = _conversation(tl)
    result = tl("rewrite", "--conversation", cid, "--no-model", "--json",
                "How did that compare to the year before?")
    assert result.code == 0, result.err
    body = result.json()
    assert {"raw", "rewritten", "preserved", "winner", "latency_ms"} <= set(body)
    assert body["winner"] == "deterministic"
    assert "FY2024" in body["rewritten"] and "ITEM 1B" in body["rewritten"]
    raced = tl("rewrite", "--conversation", cid, "--json", "--deadline", "0.5",
               "And the year before?")  # the scripted model races too, and loses
    assert raced.code == 0 and raced.json()["winner"] in ("deterministic", "raw")


def test_rewrite_refuses_bad_input_and_writes_nothing(tl: Invoke, home: Path) -> None:
    cid = _conversation(tl)
    before = snapshot(home)
    empty = tl("rewrite", "--conversation", cid, "--no-model", "   ")
    assert empty.code == 2 and "empty" in empty.err
    unknown = tl("rewrite", "--conversation", "c_missing", "--no-model", "and then?")
    assert unknown.code == 3 and "c_missing" in unknown.err
    assert snapshot(home) == before


def test_eval_canard_scores_each_rewriter(tl: Invoke, tmp_path: Path) -> None:
    data = tmp_path / "canard.json"
    data.write_text(json.dumps(CANARD))
    result = tl("eval", "canard", str(data), "--model-limit", "2", "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert set(report["rewriters"]) == {"raw", "topic rules", "deterministic", "model", "race"}
    assert report["split"]["name"] == "unsplit" and report["salience_cost"]["p50_ratio"]
    raw, det = report["rewriters"]["raw"], report["rewriters"]["deterministic"]
    assert raw["resolution_recall"] == 0.0 and raw["noop_precision"] == 1.0
    assert det["must_preserve_retention"] == 1.0
    assert det["resolution_recall"] > 0.5
    assert report["rewriters"]["model"]["examples"] == 2


def test_eval_canard_refuses_a_file_that_is_not_canard(tl: Invoke, tmp_path: Path) -> None:
    for content, message in [("{not json", "is not JSON"), ("[]", "non-empty JSON array"),
                             ('[{"History": "x"}]', "record 0 is not a CANARD record")]:
        bad = tmp_path / "bad.json"
        bad.write_text(content)
        result = tl("eval", "canard", str(bad), "--model-limit", "0")
        assert result.code == 2 and message in result.err, result.err
