"""The model classifier: any backend rates the recent messages, each call is recorded as a
side call, and an unreadable answer is a zero with its reason, never a failed turn."""

from __future__ import annotations

from threadline.models.scripted import ScriptedModel
from threadline.providers.monitor import ModelClassifier, RuleDetector, TrajectoryMonitor
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.turn import monitoring


def _classifier_signals(store: SQLiteStore, cid: str) -> list[dict[str, object]]:
    return [s for i in store.history(cid) if (d := monitoring.decision(i)) is not None
            for s in d["signals"] if s["name"] == "classifier"]


def test_the_classifier_rates_from_the_second_turn_and_records_its_call(
        store: SQLiteStore) -> None:
    judge = ScriptedModel(default=lambda r: "7")
    monitor = TrajectoryMonitor([RuleDetector(), ModelClassifier(judge)])
    engine = standard_engine(store, ScriptedModel(), monitor=monitor)
    first = engine.run_turn("Hello, which apps share a location?")
    engine.run_turn("Can they be hidden?", conversation_id=first.conversation_id)
    signals = _classifier_signals(store, first.conversation_id)
    assert [s["score"] for s in signals] == [0.0, 0.7]
    side = [c for c in store.calls(first.conversation_id) if c.purpose == "monitor"]
    assert len(side) == 1 and side[0].model == "scripted"
    request = store.call(side[0].id).request
    assert request is not None and "Can they be hidden?" in request.messages[-1]["content"]


def test_an_unreadable_answer_is_a_zero_with_its_reason(store: SQLiteStore) -> None:
    monitor = TrajectoryMonitor([ModelClassifier(ScriptedModel(default=lambda r: "no idea"))])
    engine = standard_engine(store, ScriptedModel(), monitor=monitor)
    first = engine.run_turn("Hello")
    second = engine.run_turn("Again", conversation_id=first.conversation_id)
    assert second.call.purpose == "turn"  # the turn went on
    signal = _classifier_signals(store, first.conversation_id)[-1]
    assert signal["score"] == 0.0 and "unreadable" in str(signal["detail"])
    side = [c for c in store.calls(first.conversation_id) if c.purpose == "monitor"]
    assert side[0].error is not None


def test_the_setting_names_the_classifiers_backend() -> None:
    from threadline.errors import InputError
    from threadline.settings import Settings

    def read(value: str) -> str | None:
        return Settings.from_env({"THREADLINE_HOME": "/tmp/x",
                                  "THREADLINE_MONITOR_CLASSIFIER": value}).monitor_classifier
    assert read("anthropic") == "anthropic" and read(" scripted ") == "scripted"
    assert read("0") is None and read("off") is None
    assert Settings.from_env({"THREADLINE_HOME": "/tmp/x"}).monitor_classifier is None
    try:
        read("Open AI!")
    except InputError as err:
        assert "THREADLINE_MONITOR_CLASSIFIER" in str(err)
    else:
        raise AssertionError("a malformed backend name was accepted")
