"""Per-turn-index curves, checked against a store of calls with known numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from threadline.cache.pricing import profile
from threadline.calls import CallStatus, ModelCall, SentRequest, Timings, Usage
from threadline.errors import InputError, UnknownConversation
from threadline.items import NewItem, new_id
from threadline.stats import (
    LAST_TURN_BUCKET,
    TURN_INDEX_BUCKETS,
    curves,
    since_of,
    sparkline,
    turn_samples,
)
from threadline.stores.base import Commit, NewConversation, Store
from threadline.stores.sqlite import SQLiteStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NONE = profile("none")  # no caching: a turn costs its prompt tokens at list price


def _call(cid: str, turn: int, prompt: int, cached: int, ttft: float | None, *,
          purpose: str = "turn", failed: bool = False, at: datetime = T0) -> ModelCall:
    return ModelCall(
        id=new_id("call_"), conversation_id=cid, branch="main", turn=turn, head_seq=1,
        reply_seq=None, status=CallStatus.FAILED if failed else CallStatus.OK,
        model="scripted", request=SentRequest("scripted", ({"role": "user", "content": "q"},)),
        response={"text": "a"}, usage=Usage(prompt, cached, 5),
        timings=Timings(ttft, 10.0), started_at=at, purpose=purpose)


def _conversation(store: Store, calls: list[tuple[int, int, int, float | None, dict[str, object]]],
                  at: datetime) -> str:
    cid = new_id("c_")
    store.commit(Commit(conversation_id=cid, created_at=at, expected_head=None,
                        create=NewConversation(cid), items=[NewItem.user("q")]))
    for turn, prompt, cached, ttft, extra in calls:
        call = _call(cid, turn, prompt, cached, ttft, at=at, **extra)  # type: ignore[arg-type]
        store.commit(Commit(conversation_id=cid, created_at=at, check_head=False, call=call))
    return cid


def record_known_turns(store: Store) -> list[str]:
    """Three conversations, a day apart; their figures per turn (ttft ms, prompt, cached):

        turn 1   A 100, 1000, 0      B 200, 1200, 0                C 300, 800, 0
        turn 2   A 50, 2000, 1500    B 70+30, 1200+1200, 900+900   C failed, then 90, 1600, 800
                                     and a 500-token side call
        turn 3   A 40, 3000, 2700
    """
    a = _conversation(store, [(1, 1000, 0, 100.0, {}), (2, 2000, 1500, 50.0, {}),
                              (3, 3000, 2700, 40.0, {})], T0)
    b = _conversation(store, [(1, 1200, 0, 200.0, {}), (2, 1200, 900, 70.0, {}),
                              (2, 1200, 900, 30.0, {}),
                              (2, 500, 0, 20.0, {"purpose": "compaction"})],
                      T0 + timedelta(days=1))
    c = _conversation(store, [(1, 800, 0, 300.0, {}), (2, 0, 0, None, {"failed": True}),
                              (2, 1600, 800, 90.0, {})], T0 + timedelta(days=2))
    return [a, b, c]


def test_the_medians_and_percentiles_per_turn_index(store: SQLiteStore) -> None:
    record_known_turns(store)
    points = curves(turn_samples(store, profile=NONE, input_price=1.0))
    assert [(p.label, p.turns, p.conversations) for p in points] == [
        ("1", 3, 3), ("2", 3, 3), ("3", 1, 1)]
    one, two, three = (p.metrics for p in points)
    assert (one["ttft_ms"].median, one["ttft_ms"].p90) == (200.0, 280.0)
    assert (one["prompt_tokens"].median, one["reuse_ratio"].median) == (1000, 0.0)
    # turn 2: the first turn call's TTFT; every round's tokens; the side call only in cost
    assert (two["ttft_ms"].median, two["ttft_ms"].count) == (70.0, 3)
    assert two["prompt_tokens"].median == 2000 and two["prompt_tokens"].p90 == 2320
    assert two["reuse_ratio"].median == 0.75 and two["reuse_ratio"].p90 == 0.75
    assert min(s.reuse_ratio for s in turn_samples(store, profile=NONE, input_price=1.0)
               if s.turn == 2) == 0.5
    assert two["cost_usd"].median == pytest.approx(0.002)
    assert two["cost_usd"].p90 == pytest.approx(0.00272)  # 0.0016, 0.002, 0.0029
    assert (three["prompt_tokens"].count, three["prompt_tokens"].median,
            three["prompt_tokens"].p90) == (1, 3000, 3000)


def test_since_and_conversation_narrow_the_samples(store: SQLiteStore) -> None:
    a, b, c = record_known_turns(store)
    later = turn_samples(store, profile=NONE, input_price=1.0, since=T0 + timedelta(days=1))
    assert {s.conversation_id for s in later} == {b, c}
    only = turn_samples(store, profile=NONE, input_price=1.0, conversations=[a])
    assert [(s.turn, s.prompt_tokens) for s in only] == [(1, 1000), (2, 2000), (3, 3000)]
    with pytest.raises(UnknownConversation):
        turn_samples(store, profile=NONE, input_price=1.0, conversations=[a, "c_nope"])


def test_many_turn_indexes_are_bucketed(store: SQLiteStore) -> None:
    _conversation(store, [(n, n * 100, 0, 10.0, {}) for n in range(1, 26)], T0)
    samples = turn_samples(store, profile=NONE, input_price=1.0)
    assert len(curves(samples, "turn")) == 25
    points = curves(samples)  # auto: past 20 indexes, buckets
    assert [p.label for p in points] == ["1", "2-5", "6-10", "11-20", "21-50"]
    assert [p.metrics["prompt_tokens"].median for p in points] == [100, 350, 800, 1550, 2300]
    with pytest.raises(InputError, match="unknown grouping"):
        curves(samples, "weekly")


def test_the_buckets_are_the_metrics_buckets() -> None:
    pytest.importorskip("prometheus_client", reason="install the metrics extra")
    from threadline.metrics import turns

    assert (TURN_INDEX_BUCKETS, LAST_TURN_BUCKET) == (turns.TURN_INDEX_BUCKETS,
                                                      turns.LAST_TURN_BUCKET)


def test_since_reads_dates_times_and_spans() -> None:
    now = datetime(2026, 3, 10, 8, 0, tzinfo=UTC)
    assert since_of("7d", now) == now - timedelta(days=7)
    assert since_of("36h", now) == now - timedelta(hours=36)
    assert since_of("90m", now) == now - timedelta(minutes=90)
    assert since_of("2026-03-01", now) == datetime(2026, 3, 1, tzinfo=UTC)
    assert since_of("2026-03-01T09:30+01:00", now) == datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
    assert since_of("2026-03-01T09:30Z", now) == datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    with pytest.raises(InputError, match="neither an ISO date or time nor a span"):
        since_of("last week", now)


def test_a_sparkline_scales_from_zero_to_the_highest() -> None:
    assert sparkline([0.0, 1.0, 2.0, 8.0, None, 8.0]) == "▁▂▃█ █"
    assert sparkline([6.2, 6.3]) == "██" and sparkline([0.0, 0.0]) == "▁▁"
    assert sparkline([None]) == " " and sparkline([]) == ""


def test_a_turn_with_only_side_calls_is_not_a_sample(store: SQLiteStore) -> None:
    cid = _conversation(store, [(1, 100, 0, 5.0, {"purpose": "memory"})], T0)
    assert turn_samples(store, profile=NONE, input_price=1.0, conversations=[cid]) == []
    assert curves([]) == []
