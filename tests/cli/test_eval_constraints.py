"""``threadline eval constraints``: figures on a fixture of our own, and clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from tests.eval.test_constraint_eval import write_annotations, write_data
from tests.retrieval.test_dense import require_dense


def test_scores_a_split_with_counts_and_per_label_recall(tl: Invoke,
                                                         tmp_path: Path) -> None:
    data = write_data(tmp_path)
    annotations = write_annotations(tmp_path, data)
    run = tl("eval", "constraints", "--split", "dev", "--data", str(data),
                 "--annotations", str(annotations), "--json", "--no-classifier")
    assert run.code == 0, run.err
    report = run.json()
    assert report["split"] == "dev" and report["detector"] == "rules"
    assert (report["precision"], report["recall"]) == (1.0, 0.5)
    assert report["annotated"] == {"tp": 2, "fp": 0, "fn": 1, "tn": 1}
    assert report["per_label_recall"]["preference"]["found"] == 1
    human = tl("eval", "constraints", "--split", "dev", "--data", str(data),
                   "--annotations", str(annotations), env={
                       "THREADLINE_CONSTRAINT_CLASSIFIER": "0"})  # the setting, not the flag
    assert human.code == 0
    assert "split dev" in human.out and "precision 1.0  recall 0.5" in human.out
    assert "persona" in human.out and "detector: rules" in human.out


def test_scores_the_rules_with_the_classifier_when_asked(tl: Invoke, tmp_path: Path) -> None:
    require_dense()
    data = write_data(tmp_path)
    annotations = write_annotations(tmp_path, data)
    args = ("eval", "constraints", "--split", "dev", "--data", str(data),
            "--annotations", str(annotations), "--json")
    assert tl(*args).json()["detector"] == "rules"  # the setting's default: off
    report = tl(*args, "--classifier").json()
    assert report["detector"] == "rules + classifier"
    # "From now on, answer in French." scores far above the threshold, the near-miss and the
    # unlabelled sentences far below ("I'd prefer a window seat." sits at it: not asserted)
    assert report["per_label_recall"]["scope"]["found"] == 1
    assert report["annotated"]["fp"] == 0 and report["one_off"]["flagged"] == 0


def test_the_classifier_asked_for_without_the_extra_is_refused(
        tl: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_data(tmp_path)
    annotations = write_annotations(tmp_path, data)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    run = tl("eval", "constraints", "--split", "dev", "--data", str(data),
             "--annotations", str(annotations), "--classifier")
    assert run.code != 0
    assert "dense extra" in run.err and "threadline[dense]" in run.err
    fallback = tl("eval", "constraints", "--split", "dev", "--data", str(data),
                  "--annotations", str(annotations), "--json")  # the default: the rules
    assert fallback.code == 0 and fallback.json()["detector"] == "rules"


def test_a_missing_data_directory_is_refused(tl: Invoke, tmp_path: Path) -> None:
    run = tl("eval", "constraints", "--data", str(tmp_path / "absent"))
    assert run.code != 0
    assert "is not a directory" in run.err and "--data" in run.err


def test_data_without_the_sources_is_refused(tl: Invoke, tmp_path: Path) -> None:
    run = tl("eval", "constraints", "--data", str(tmp_path))
    assert run.code != 0
    assert "missing" in run.err and "sharegpt_sample_1000.jsonl" in run.err


def test_a_bad_annotation_file_is_refused(tl: Invoke, tmp_path: Path) -> None:
    data = write_data(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("[1, 2]\n", "utf-8")
    run = tl("eval", "constraints", "--data", str(data), "--annotations", str(bad))
    assert run.code != 0 and "not a constraint annotation file" in run.err


def test_an_unknown_split_is_refused(tl: Invoke, tmp_path: Path) -> None:
    run = tl("eval", "constraints", "--split", "train", "--data", str(tmp_path))
    assert run.code != 0 and "train" in run.err
