"""``threadline eval safety`` from the command line, on the scripted model."""

from __future__ import annotations

from tests.cli.conftest import Invoke


def test_reports_both_splits_on_the_scripted_model(tl: Invoke) -> None:
    run = tl("eval", "safety", "--model", "scripted", "--no-embeddings", "--no-planted",
             "--json")
    assert run.code == 0, run.err
    report = run.json()
    assert set(report["splits"]) == {"dev", "test"}
    assert report["splits"]["dev"]["tuned_on"] and not report["splits"]["test"]["tuned_on"]
    assert report["detectors"] == ["rules"]
    human = tl("eval", "safety", "--model", "scripted", "--no-embeddings", "--no-planted",
               "--split", "test")
    assert human.code == 0 and "test (held out)" in human.out and "per message" in human.out


def test_an_unknown_split_is_refused(tl: Invoke) -> None:
    run = tl("eval", "safety", "--split", "train")
    assert run.code == 2 and "train" in run.err
