"""``threadline eval cast``: the rewriters on TREC CAsT topics, with the split they ran on."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Invoke
from tests.eval.test_cast import REWRITES_2019, TOPICS_2019, TOPICS_2020


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "2019_evaluation_topics_v1.0.json").write_text(json.dumps(TOPICS_2019))
    (tmp_path / "2019_evaluation_topics_annotated_resolved_v1.0.tsv").write_text(REWRITES_2019)
    (tmp_path / "2020_manual_evaluation_topics_v1.0.json").write_text(json.dumps(TOPICS_2020))
    return tmp_path


def test_eval_cast_scores_dev_by_default_and_says_so(tl: Invoke, tmp_path: Path) -> None:
    result = tl("eval", "cast", str(_folder(tmp_path)), "--model-limit", "0", "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["year"] == 2019
    assert report["split"] == {"name": "dev", "tuned_on": True, "what": "TREC CAsT 2019"}
    assert set(report["rewriters"]) == {"raw", "topic rules", "deterministic"}
    det = report["rewriters"]["deterministic"]
    assert det["resolution_recall"] == 1.0 and det["must_preserve_retention"] == 1.0
    assert report["rewriters"]["topic rules"]["resolution_recall"] == 0.0
    human = tl("eval", "cast", str(tmp_path), "--model-limit", "0")
    assert human.code == 0 and "split: dev (TREC CAsT 2019; tuned on)" in human.out


def test_eval_cast_2020_is_held_out_and_scores_the_automatic_rewrites(tl: Invoke,
                                                                      tmp_path: Path) -> None:
    result = tl("eval", "cast", str(_folder(tmp_path)), "--year", "2020", "--model-limit", "0",
                "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["split"]["name"] == "test" and not report["split"]["tuned_on"]
    assert report["examples"] == 2  # topic 82; topic 81 is in the dev half
    assert report["rewriters"]["deterministic"]["resolution_precision"] == 1.0
    automatic = report["rewriters"]["automatic"]
    assert automatic["latency_p50_ms"] is None and "not measured" in automatic["note"]
    assert automatic["resolution_recall"] > 0
    assert report["rewriters"]["raw"]["resolution_recall"] == 0.0
    human = tl("eval", "cast", str(tmp_path / "2020_manual_evaluation_topics_v1.0.json"),
               "--model-limit", "0")
    assert human.code == 0 and "held out" not in human.err
    assert "split: test (TREC CAsT 2020, test half; not tuned on)" in human.out
    for half, examples, tuned_on in (("dev", 1, True), ("all", 3, True)):
        other = tl("eval", "cast", str(tmp_path), "--year", "2020", "--half", half,
                   "--model-limit", "0", "--json")
        assert other.code == 0, other.err
        assert (other.json()["examples"], other.json()["split"]["tuned_on"]) == \
            (examples, tuned_on)


def test_eval_cast_refuses_bad_input(tl: Invoke, tmp_path: Path) -> None:
    missing = tl("eval", "cast", str(tmp_path / "nope.json"), "--model-limit", "0")
    assert missing.code == 2 and "does not exist" in missing.err
    canard = tmp_path / "canard.json"
    canard.write_text(json.dumps([{"History": [], "Question": "q", "Rewrite": "q"}]))
    wrong = tl("eval", "cast", str(canard), "--model-limit", "0")
    assert wrong.code == 2 and "record 0 is not a CAsT topic" in wrong.err, wrong.err
    (tmp_path / "data").mkdir()
    folder = _folder(tmp_path / "data")
    tsv = tl("eval", "cast", str(folder / "2019_evaluation_topics_annotated_resolved_v1.0.tsv"))
    assert tsv.code == 2 and "pass the 2019 topics JSON" in tsv.err
    year = tl("eval", "cast", str(folder / "2020_manual_evaluation_topics_v1.0.json"),
              "--year", "2019", "--model-limit", "0")
    assert year.code == 2 and "2020 format, not 2019" in year.err
    bad_year = tl("eval", "cast", str(folder), "--year", "2021")
    assert bad_year.code == 2 and "2021" in bad_year.err
    half = tl("eval", "cast", str(folder), "--half", "dev", "--model-limit", "0")
    assert half.code == 2 and "the 2019 topics are all dev" in half.err
