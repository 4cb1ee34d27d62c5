"""Reading TREC CAsT topics in the 2019 (JSON + TSV) and 2020 (JSON) formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from threadline.errors import InputError
from threadline.eval.cast import CastFiles, load, locate
from threadline.eval.splits import CAST_2020_SPLITS, CAST_SPLITS, canard_split, cast_2020_half

TOPICS_2019 = [{"number": 31, "title": "head and neck cancer",
                "turn": [{"number": 2, "raw_utterance": "Is it treatable?"},
                         {"number": 1, "raw_utterance": "What is throat cancer?"}]}]
REWRITES_2019 = "31_1\tWhat is throat cancer?\n31_2\tIs throat cancer treatable?\n"
# topic 82 is in the held-out half of the 2020 topics, 81 in the dev half (`cast_2020_half`)
TOPICS_2020 = [{"number": 82, "turn": [
    {"number": 1, "raw_utterance": "How do you know when your garage door opener is going bad?",
     "manual_rewritten_utterance": "How do you know when your garage door opener is going bad?",
     "automatic_rewritten_utterance": "How do you know when your garage door opener is going "
                                      "bad?"},
    {"number": 2, "raw_utterance": "Now it stopped working. Why?",
     "manual_rewritten_utterance": "Now my garage door opener stopped working. Why?",
     "automatic_rewritten_utterance": "Why did garage door opener stop working?"}]},
    {"number": 81, "turn": [
        {"number": 1, "raw_utterance": "What is a heat pump?",
         "manual_rewritten_utterance": "What is a heat pump?",
         "automatic_rewritten_utterance": "What is a heat pump?"}]}]


def _write(folder: Path) -> Path:
    (folder / "2019_evaluation_topics_v1.0.json").write_text(json.dumps(TOPICS_2019))
    (folder / "2019_evaluation_topics_annotated_resolved_v1.0.tsv").write_text(REWRITES_2019)
    (folder / "2020_manual_evaluation_topics_v1.0.json").write_text(json.dumps(TOPICS_2020))
    return folder


def test_2019_turns_come_in_order_with_earlier_questions_as_history(tmp_path: Path) -> None:
    files = locate(_write(tmp_path))
    assert files.year == 2019 and files.rewrites is not None
    turns = load(files)
    assert [t.key for t in turns] == ["31_1", "31_2"]
    second = turns[1]
    assert second.example.question == "Is it treatable?"
    assert second.example.rewrite == "Is throat cancer treatable?"
    assert [t.text for t in second.example.history] == ["What is throat cancer?"]
    assert second.automatic is None
    # the title is not shown to the rewriter: a user types none
    assert all("neck" not in t.text for turn in turns for t in turn.example.history)


def test_2020_turns_carry_the_automatic_rewrite(tmp_path: Path) -> None:
    folder = _write(tmp_path)
    for files in (locate(folder, 2020), locate(folder / "2020_manual_evaluation_topics_v1.0.json")):
        assert files == CastFiles(2020, folder / "2020_manual_evaluation_topics_v1.0.json", None)
    turns = load(locate(folder, 2020))
    assert turns[1].automatic == "Why did garage door opener stop working?"
    assert turns[1].example.rewrite == "Now my garage door opener stopped working. Why?"


def test_a_2019_file_finds_its_rewrites_beside_it_or_is_told_where(tmp_path: Path) -> None:
    folder = _write(tmp_path)
    topics = folder / "2019_evaluation_topics_v1.0.json"
    assert locate(topics).rewrites == folder / "2019_evaluation_topics_annotated_resolved_v1.0.tsv"
    lonely = tmp_path / "alone"
    lonely.mkdir()
    (lonely / "topics.json").write_text(json.dumps(TOPICS_2019))
    with pytest.raises(InputError, match="separate TSV"):
        locate(lonely / "topics.json")
    given = locate(lonely / "topics.json", rewrites=folder /
                   "2019_evaluation_topics_annotated_resolved_v1.0.tsv")
    assert len(load(given)) == 2


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "is not JSON"),
    ("[]", "non-empty JSON array"),
    ('[{"number": 1, "turn": "x"}]', "record 0 is not a CAsT topic"),
    ('[{"number": 1, "turn": [{"number": 1}]}]', "record 0 is not a CAsT topic"),
])
def test_a_file_that_is_not_cast_topics_is_refused(tmp_path: Path, content: str,
                                                   message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    (tmp_path / "x_resolved.tsv").write_text(REWRITES_2019)
    with pytest.raises(InputError, match=message):
        load(locate(bad))


def test_mismatched_or_incomplete_files_are_refused(tmp_path: Path) -> None:
    folder = _write(tmp_path)
    with pytest.raises(InputError, match="CAsT 2020 format, not 2019"):
        locate(folder / "2020_manual_evaluation_topics_v1.0.json", 2019)
    with pytest.raises(InputError, match="rewrites TSV, not a topics file"):
        locate(folder / "2019_evaluation_topics_annotated_resolved_v1.0.tsv")
    (folder / "2019_evaluation_topics_annotated_resolved_v1.0.tsv").write_text("31_1\tonly one\n")
    with pytest.raises(InputError, match="turn 31_2 has no manual rewrite"):
        load(locate(folder))
    (folder / "2019_evaluation_topics_annotated_resolved_v1.0.tsv").write_text("no tab here\n")
    with pytest.raises(InputError, match="line 1 is not"):
        load(locate(folder))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="holds 0 files"):
        locate(empty, 2020)


def test_the_split_is_fixed_by_the_data() -> None:
    assert CAST_SPLITS[2019].name == "dev" and CAST_SPLITS[2019].tuned_on
    assert CAST_SPLITS[2020].name == "test" and not CAST_SPLITS[2020].tuned_on
    # the 2020 topics are halved by their number, and the halves do not move
    halves = [cast_2020_half(n) for n in range(81, 106)]
    assert (halves.count("dev"), halves.count("test")) == (10, 15)
    assert [n for n in range(81, 106) if cast_2020_half(n) == "dev"] == \
        [81, 87, 89, 91, 96, 99, 100, 101, 102, 103]
    assert CAST_2020_SPLITS["dev"].tuned_on and not CAST_2020_SPLITS["test"].tuned_on
    assert CAST_2020_SPLITS["all"].tuned_on  # half of it was read
    assert canard_split(Path("../shared/data/canard/dev.json")).tuned_on
    assert canard_split(Path("test.json")).name == "unsplit"
    assert "held out" in CAST_SPLITS[2020].describe()
