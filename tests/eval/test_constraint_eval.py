"""The constraint annotations join to their text by address, refuse data that drifted, and are
scored with the sampled non-candidates weighted by what they stand for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from threadline.compaction.constraints import detect
from threadline.errors import InputError
from threadline.eval import constraints as constraint_eval
from threadline.eval.constraint_annotations import (
    count_strata,
    header,
    load,
    read_annotations,
    stratum,
    text_hash,
)
from threadline.eval.constraint_corpus import (
    LOST_IN_CONVERSATION,
    SHAREGPT,
    SOURCE_FILES,
    TAU_BENCH,
    corpus,
    message_texts,
    split_of,
)

# A tiny corpus in the three sources' formats. Every conversation falls in dev; "Write a poem
# about cats." (message 2 of s69_0) is a sampled non-candidate, "What is 2+2?" an unread one,
# so the sampled sentence stands for two.
LABELS = {
    "From now on, answer in French.": "scope",
    "Write a poem about cats.": "persona",      # pretend: a rule the filter missed
    "I'd prefer a window seat.": "preference",
    "Each truck carries 2000 pounds.": "one_off",
}


def write_data(root: Path) -> Path:
    data = root / "data"
    for file in SOURCE_FILES:
        (data / file).parent.mkdir(parents=True, exist_ok=True)
        (data / file).write_text("", "utf-8")
    (data / SHAREGPT).write_text(json.dumps({"id": "s69_0", "conversations": [
        {"from": "human", "value": "From now on, answer in French. What is 2+2?"},
        {"from": "gpt", "value": "4"},
        {"from": "human", "value": "Write a poem about cats."}]}) + "\n", "utf-8")
    (data / TAU_BENCH).write_text(json.dumps([{"task_id": 1, "trial": 0, "traj": [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "I'd prefer a window seat. Please book it now."}]}]),
        "utf-8")
    (data / LOST_IN_CONVERSATION[0]).write_text(json.dumps({"conv_id": "c1", "task_id": "t1",
        "trace": [{"role": "user", "content": "Each truck carries 2000 pounds."}]}) + "\n",
        "utf-8")
    return data


def write_annotations(root: Path, data: Path, labels: dict[str, str] = LABELS) -> Path:
    lines: list[Any] = [header(count_strata(corpus(data)))]
    for s in corpus(data):
        if s.text in labels:
            lines.append({"file": s.file, "conversation": s.conversation, "message": s.index,
                          "start": s.start, "end": s.end, "label": labels[s.text],
                          "hash": text_hash(s.text)})
    path = root / "annotations.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    return path


def test_the_fixture_falls_in_the_strata_the_scores_below_assume(tmp_path: Path) -> None:
    data = write_data(tmp_path)
    kinds = {s.text: (s.split, stratum(s)) for s in corpus(data)}
    assert kinds == {"From now on, answer in French.": ("dev", "candidate"),
                     "What is 2+2?": ("dev", None),
                     "Write a poem about cats.": ("dev", "sample"),
                     "I'd prefer a window seat.": ("dev", "candidate"),
                     "Please book it now.": ("dev", None),
                     "Each truck carries 2000 pounds.": ("dev", "candidate")}


def test_annotations_join_to_their_sentences_and_score_with_weights(tmp_path: Path) -> None:
    data = write_data(tmp_path)
    annotated, strata = load(data, write_annotations(tmp_path, data))
    assert {a.sentence.text: (a.stratum, a.label) for a in annotated} == {
        "From now on, answer in French.": ("candidate", "scope"),
        "Write a poem about cats.": ("sample", "persona"),
        "I'd prefer a window seat.": ("candidate", "preference"),
        "Each truck carries 2000 pounds.": ("candidate", "one_off")}
    assert strata.weight("dev", "sharegpt-sample-1000") == 2.0
    scored, _ = constraint_eval.flag(annotated, detect, message_texts(data))
    report = constraint_eval.score(scored, strata, "dev")
    assert report["annotated"] == {"tp": 2, "fp": 0, "fn": 1, "tn": 1}
    assert report["estimated"] == {"tp": 2.0, "fp": 0.0, "fn": 2.0, "tn": 1.0}
    assert (report["precision"], report["recall"]) == (1.0, 0.5)
    assert report["per_label_recall"]["persona"] == {"rules": 1, "found": 0, "recall": 0.0}
    assert report["per_label_recall"]["scope"]["recall"] == 1.0
    assert report["one_off"] == {"annotated": 1, "flagged": 0}
    empty = constraint_eval.score(scored, strata, "test")
    assert (empty["precision"], empty["recall"], empty["rules_annotated"]) == (None, None, 0)


def test_a_flagged_negative_counts_against_precision(tmp_path: Path) -> None:
    data = write_data(tmp_path)
    annotated, strata = load(data, write_annotations(tmp_path, data))
    everything = constraint_eval.flag(annotated, lambda text: [a.sentence.text for a in annotated],
                                      message_texts(data))[0]
    report = constraint_eval.score(everything, strata, "dev")
    assert report["annotated"]["fp"] == 1 and report["one_off"]["flagged"] == 1
    assert report["precision"] == 0.8  # 4 (2 + the sample's weight 2) ÷ 5


def test_the_split_is_stable_and_halves_the_groups() -> None:
    assert split_of(SHAREGPT, "s69") == "dev"
    splits = [split_of(SHAREGPT, f"g{n}") for n in range(400)]
    assert 150 < splits.count("dev") < 250


def test_an_unknown_split_is_refused(tmp_path: Path) -> None:
    data = write_data(tmp_path)
    annotated, strata = load(data, write_annotations(tmp_path, data))
    with pytest.raises(InputError, match="unknown split"):
        constraint_eval.score([], strata, "train")


def test_data_that_changed_since_annotation_is_refused(tmp_path: Path) -> None:
    data = write_data(tmp_path)
    path = write_annotations(tmp_path, data)
    (data / TAU_BENCH).write_text(json.dumps([{"task_id": 1, "trial": 0, "traj": [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "I'd prefer a middle seat. Please book it now."}]}]),
        "utf-8")
    with pytest.raises(InputError, match="no longer matches"):
        load(data, path)
    (data / TAU_BENCH).write_text("[]", "utf-8")
    with pytest.raises(InputError, match="candidate sentences"):
        load(data, path)


def test_missing_source_files_are_named(tmp_path: Path) -> None:
    data = write_data(tmp_path)
    (data / TAU_BENCH).unlink()
    with pytest.raises(InputError, match="gpt-4o-airline.json"):
        load(data, write_annotations(tmp_path, write_data(tmp_path / "other")))


@pytest.mark.parametrize(("content", "message"), [
    ("", "not a constraint annotation file"),
    ('{"format": "something else"}\n', "not a constraint annotation file"),
    ('{"format": "threadline-constraint-annotations/1"}\nnot json\n', "line 2 is not JSON"),
    ('{"format": "threadline-constraint-annotations/1"}\n{"file": "x", "label": "rule"}\n',
     "line 2 is not an annotation record"),
])
def test_a_bad_annotation_file_is_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, "utf-8")
    with pytest.raises(InputError, match=message):
        read_annotations(path)


def test_the_shipped_annotations_are_well_formed() -> None:
    from threadline.eval.constraint_annotations import ANNOTATIONS
    head, records = read_annotations(ANNOTATIONS)
    assert len(records) > 500
    assert {r["label"] for r in records} >= {"scope", "persona", "format", "one_off"}
    assert set(head["strata"]["candidate"]) == {f"{split}/{source}" for split in ("dev", "test")
                                                for source in ("sharegpt-sample-1000",
                                                               "tau-bench-trajectories",
                                                               "lost-in-conversation")}
