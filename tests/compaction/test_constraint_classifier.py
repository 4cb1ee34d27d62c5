"""The embedding classifier for standing constraints: its weights file refuses another model,
it scores a message's sentences in one batch with the rules' verdicts as features, and without
the dense extra everything falls back to the rules, said once."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.retrieval.test_dense import require_dense
from threadline import standard
from threadline.compaction.constraint_classifier import (
    RULE_FEATURES,
    WEIGHTS,
    ClassifiedDetector,
    Weights,
    read_weights,
    write_weights,
)
from threadline.compaction.constraints import detect
from threadline.errors import InputError
from threadline.models.scripted import ScriptedModel
from threadline.retrieval import dense
from threadline.settings import Settings
from threadline.standard import constraint_detector, standard_engine
from threadline.stores.sqlite import SQLiteStore


class FakeEmbedder:
    """Two dimensions: how much a sentence talks about replies, and about cats."""

    name = "fake-2d"
    dimension = 2

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def vectors(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return [[float("repl" in t or "answer" in t), float("cat" in t)] for t in texts]


def fake_weights(tmp_path: Path, *, union: bool = False, rule_weight: float = 0.0,
                 model: str = "fake-2d", dim: int = 2, name: str = "weights.json") -> Path:
    path = tmp_path / name
    coef = (3.0, -1.0, *([0.0] * (dim - 2))) + tuple(
        rule_weight if name == "rule" else 0.0 for name in RULE_FEATURES)
    write_weights(path, Weights(model=model, dim=dim, rule_features=RULE_FEATURES, union=union,
                                coef=coef, bias=-1.0, threshold=0.0, l2=1.0, trained_on="test"))
    return path


def test_the_shipped_weights_are_for_minilm_and_trained_on_dev() -> None:
    weights = read_weights(WEIGHTS, model=dense.MODEL_NAME, dim=dense.DIMENSION)
    assert weights.trained_on == "dev"
    assert len(weights.coef) == dense.DIMENSION + len(weights.rule_features)


def test_weights_made_for_another_embedding_model_are_refused(tmp_path: Path) -> None:
    path = fake_weights(tmp_path, model="other-model", dim=768)
    with pytest.raises(InputError) as err:
        read_weights(path, model=dense.MODEL_NAME, dim=dense.DIMENSION)
    assert "'other-model' (768 dimensions)" in err.value.message
    assert dense.MODEL_NAME in err.value.message and "retrain" in (err.value.hint or "")
    with pytest.raises(InputError, match="768 dimensions"):  # the same name, another size
        read_weights(fake_weights(tmp_path, model=dense.MODEL_NAME, dim=768, name="w2.json"),
                     model=dense.MODEL_NAME, dim=dense.DIMENSION)
    with pytest.raises(InputError, match="other-model"):
        ClassifiedDetector(FakeEmbedder, model=dense.MODEL_NAME, dim=dense.DIMENSION,
                           weights=path)


@pytest.mark.parametrize(("content", "says"), [
    ("not json", "not JSON"),
    ('{"format": "something-else/1"}', "not a constraint classifier weights file"),
])
def test_a_file_that_is_not_weights_is_refused(tmp_path: Path, content: str,
                                               says: str) -> None:
    path = tmp_path / "w.json"
    path.write_text(content, "utf-8")
    with pytest.raises(InputError, match=says):
        read_weights(path, model="fake-2d", dim=2)
    with pytest.raises(InputError, match="cannot read"):
        read_weights(tmp_path / "absent.json", model="fake-2d", dim=2)


def test_coefficients_that_do_not_match_the_header_are_refused(tmp_path: Path) -> None:
    path = fake_weights(tmp_path)
    data = json.loads(path.read_text("utf-8"))
    data["coef"] = data["coef"][:-1]
    path.write_text(json.dumps(data), "utf-8")
    with pytest.raises(InputError, match="damaged"):
        read_weights(path, model="fake-2d", dim=2)


def test_an_embedder_other_than_the_weights_one_is_refused_at_first_use(
        tmp_path: Path) -> None:
    class Other(FakeEmbedder):
        name = "other"

    detector = ClassifiedDetector(Other, model="fake-2d", dim=2, weights=fake_weights(tmp_path))
    with pytest.raises(InputError, match="not the one the constraint classifier"):
        detector("Always reply in French.")


def test_sentences_above_the_threshold_count_and_a_message_is_embedded_once(
        tmp_path: Path) -> None:
    made: list[FakeEmbedder] = []

    def make() -> FakeEmbedder:
        made.append(FakeEmbedder())
        return made[-1]

    detector = ClassifiedDetector(make, model="fake-2d", dim=2, weights=fake_weights(tmp_path))
    text = ("Keep every reply short. I have a cat. Does the reply matter? "
            "The weather is nice.")
    # reply: 3 - 1 = 2 ≥ 0; cat: -1 - 1 < 0; the question is never looked at
    assert detector(text) == ["Keep every reply short."]
    assert detector(text) == ["Keep every reply short."]
    assert len(made) == 1  # the model is made once
    assert made[0].batches == [["Keep every reply short.", "I have a cat.",
                                "The weather is nice."]]  # one batch, and cached after
    assert detector.scores(text) == [2.0, -2.0, -1.0]


def test_the_rules_verdicts_are_features_and_union_keeps_what_the_rules_find(
        tmp_path: Path) -> None:
    rule = "From now on, never mention cats."
    assert detect(rule) == [rule]
    plain = ClassifiedDetector(FakeEmbedder, model="fake-2d", dim=2,
                               weights=fake_weights(tmp_path))
    assert plain(rule) == []  # the classifier alone scores it -2
    weighted = ClassifiedDetector(FakeEmbedder, model="fake-2d", dim=2,
                                  weights=fake_weights(tmp_path, rule_weight=5.0))
    assert weighted(rule) == [rule]  # -2 + 5 for the rules' verdict
    union = ClassifiedDetector(FakeEmbedder, model="fake-2d", dim=2,
                               weights=fake_weights(tmp_path, union=True))
    assert union(rule) == [rule]


def test_without_an_embedding_model_the_rules_decide_and_it_is_logged_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def missing() -> FakeEmbedder:
        raise ImportError("No module named 'torch'")

    detector = ClassifiedDetector(missing, model="fake-2d", dim=2,
                                  weights=fake_weights(tmp_path))
    text = "From now on, answer in French. Keep every reply short. Hello there."
    with caplog.at_level(logging.WARNING, logger="threadline.compaction"):
        assert detector(text) == detect(text)
        assert detector("Never use emoji. Thanks.") == detect("Never use emoji. Thanks.")
    assert not detector.active
    said = [r for r in caplog.records if "classifier off" in r.getMessage()]
    assert len(said) == 1 and "threadline[dense]" in said[0].getMessage()


def test_a_failing_import_of_the_real_model_falls_back_to_the_rules(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails
    detector = ClassifiedDetector(dense.Embedder, model=dense.MODEL_NAME, dim=dense.DIMENSION)
    text = "Act as a travel agent. Book me a flight."
    with caplog.at_level(logging.WARNING, logger="threadline.compaction"):
        assert detector(text) == detect(text)
    assert not detector.active
    assert any("classifier off" in r.getMessage() for r in caplog.records)


def test_the_setting_chooses_the_detector_and_the_extra_decides_the_default(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    assert constraint_detector(False) is detect
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    assert not dense.available()
    standard._rules_only.cache_clear()  # once per process: start this process's count
    with caplog.at_level(logging.INFO, logger="threadline.compaction"):
        assert constraint_detector(None) is detect
        assert constraint_detector(None) is detect
    said = [r for r in caplog.records if "rules alone" in r.getMessage()]
    assert len(said) == 1 and "threadline[dense]" in said[0].getMessage()
    with pytest.raises(InputError) as err:
        constraint_detector(True)
    assert "dense extra" in err.value.message
    assert "THREADLINE_CONSTRAINT_CLASSIFIER=0" in (err.value.hint or "")


def test_the_setting_is_read_from_the_environment() -> None:
    home = {"THREADLINE_HOME": "/tmp/threadline-test-home"}
    assert Settings.from_env(home).constraint_classifier is False  # opt in, like memory_dense
    assert Settings.from_env({**home, "THREADLINE_CONSTRAINT_CLASSIFIER": "0"}
                             ).constraint_classifier is False
    assert Settings.from_env({**home, "THREADLINE_CONSTRAINT_CLASSIFIER": "1"}
                             ).constraint_classifier is True


def test_the_engine_compacts_with_the_detector_it_is_given(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    engine = standard_engine(store, ScriptedModel(), recall=False)
    assert engine.compactor.detector is detect  # type: ignore[union-attr]
    classified = ClassifiedDetector(FakeEmbedder, model="fake-2d", dim=2,
                                    weights=fake_weights(tmp_path))
    engine = standard_engine(store, ScriptedModel(), recall=False, constraints=classified)
    assert engine.compactor.detector is classified  # type: ignore[union-attr]
    store.close()


# -- the shipped weights over the real MiniLM model ------------------------------------------

FIXTURE = ("From now on, please answer every question in British English. "
           "I want you to act as a strict Latin teacher for the rest of this chat. "
           "The train leaves Paris at five in the morning. "
           "My sister bought a new bicycle last week.")


@pytest.fixture(scope="module")
def minilm() -> ClassifiedDetector:
    require_dense()
    return ClassifiedDetector(dense.Embedder, model=dense.MODEL_NAME, dim=dense.DIMENSION)


def test_the_shipped_classifier_scores_are_deterministic(minilm: ClassifiedDetector) -> None:
    first = minilm.scores(FIXTURE)
    assert first is not None and len(first) == 4
    again = ClassifiedDetector(dense.Embedder, model=dense.MODEL_NAME,
                               dim=dense.DIMENSION).scores(FIXTURE)
    assert again == first
    assert first == pytest.approx(PINNED, abs=1e-3)


def test_the_shipped_classifier_flags_the_rules_and_what_scores_past_its_threshold(
        minilm: ClassifiedDetector) -> None:
    # the train timetable is a false positive the recall-first threshold lets through
    assert minilm(FIXTURE) == [
        "From now on, please answer every question in British English.",
        "I want you to act as a strict Latin teacher for the rest of this chat.",
        "The train leaves Paris at five in the morning."]
    assert minilm.weights.union and minilm.weights.threshold == pytest.approx(0.672)


# the logits of FIXTURE's sentences with the shipped weights (threshold 0.672)
PINNED = [3.6140, 4.8949, 0.8233, -1.6699]
