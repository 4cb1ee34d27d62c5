"""A monitor's decisions as the log holds them: found, described, labelled, restricting."""

from __future__ import annotations

from datetime import UTC, datetime

from threadline.items import Item, ItemKind
from threadline.turn import monitoring


def _item(seq: int, kind: ItemKind, content: dict[str, object]) -> Item:
    return Item(conversation_id="c", seq=seq, branch="main", parent_seq=seq - 1 or None,
                turn=seq, kind=kind, content=content,
                hash="", created_at=datetime(2026, 1, 1, tzinfo=UTC))


def test_the_newest_decision_says_whether_tools_are_restricted() -> None:
    restricted = {"risk": 0.7, "actions": ["restrict"], "restricted": True,
                  "safe_tools": ["search"], "signals": []}
    later = {"risk": 0.2, "actions": [], "restricted": True, "safe_tools": ["search"],
             "signals": []}
    history = [_item(1, ItemKind.USER, {"text": "hi"}),
               _item(2, ItemKind.CONTEXT, {"provider": "m", monitoring.FIELD: restricted}),
               _item(3, ItemKind.CONTEXT, {"provider": "other"}),
               _item(4, ItemKind.CONTEXT, {"provider": "m", monitoring.FIELD: later})]
    assert monitoring.latest(history) == later
    assert monitoring.restriction(history) == later
    assert monitoring.restriction(history[:1]) is None
    assert monitoring.decision(history[2]) is None


def test_labels_are_bounded_and_a_quiet_decision_is_allow() -> None:
    assert monitoring.labels({"actions": ["note", "bogus", "refuse"]}) == ("note", "refuse")
    assert monitoring.labels({"actions": []}) == (monitoring.ALLOW,)


def test_a_decision_reads_as_one_line_with_its_strongest_signals() -> None:
    line = monitoring.describe({"risk": 0.72, "actions": ["remind", "flag"], "signals": [
        {"name": "drift", "score": 0.1}, {"name": "decomposition", "score": 0.9},
        {"name": "harm", "score": 0.0}]})
    assert line == "risk 0.72 → remind, flag (decomposition 0.90, drift 0.10)"
