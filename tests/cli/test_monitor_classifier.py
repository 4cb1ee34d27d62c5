"""THREADLINE_MONITOR_CLASSIFIER on the CLI, on SQLite and PostgreSQL: the named backend
becomes the monitor's model classifier; an unknown one is refused before anything is
written."""

from __future__ import annotations

from tests.cli.conftest import Invoke
from tests.cli.test_review import MONITOR, _everything, where

__all__ = ["where"]  # the store fixture, shared


def test_the_classifier_setting_adds_the_model_classifier_to_the_cli_monitor(
        tl: Invoke, where: tuple[str, ...]) -> None:
    env = {**MONITOR, "THREADLINE_MONITOR_CLASSIFIER": "scripted"}
    first = tl(*where, "chat", "--once", "Hello there.", "--json", env=env)
    assert first.code == 0, first.err
    cid = first.json()["conversation_id"]
    again = tl(*where, "chat", "--conversation", cid, "--once", "And again?", "--json", env=env)
    assert again.code == 0, again.err
    items = tl(*where, "conversations", "show", cid, "--json").json()["items"]
    decisions = [i["content"]["monitor"] for i in items if "monitor" in i["content"]]
    assert [d["detectors"] for d in decisions] == [["rules", "classifier"]] * 2
    calls = tl(*where, "calls", "list", cid, "--json").json()
    assert [c["purpose"] for c in calls].count("monitor") == 1  # from the second turn
    before = _everything(tl, where)
    bad = tl(*where, "chat", "--conversation", cid, "--once", "Third?",
             env={**MONITOR, "THREADLINE_MONITOR_CLASSIFIER": "nope"})
    assert bad.code == 2 and "unknown model 'nope'" in bad.err
    assert _everything(tl, where) == before
