"""Anthropic's prompt cache replayed over payloads, and bills from reported usage."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from threadline.cache.breakpoints import BreakpointCache, blocks_of
from threadline.cache.pricing import profile, reported_split
from threadline.cache.report import reuse_of
from threadline.calls import CallStatus, ModelCall, Timings, Usage


def _words(text: str) -> int:
    return len(text.split())


def _text(words: int, tag: str, *, mark: bool = False, ttl: str = "5m") -> dict[str, object]:
    block: dict[str, object] = {"type": "text", "text": " ".join([tag] * words)}
    if mark:
        block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return block


def _payload(turns: int, *, ttl: str = "5m", system_words: int = 2000) -> dict[str, object]:
    """A system prompt with a breakpoint, then ``turns`` exchanges of 100 words each, the last
    assistant reply marked, and a new 10-word message."""
    messages: list[dict[str, object]] = []
    for n in range(turns):
        messages.append({"role": "user", "content": [_text(50, f"u{n}")]})
        messages.append({"role": "assistant",
                         "content": [_text(50, f"a{n}", mark=n == turns - 1, ttl=ttl)]})
    messages.append({"role": "user", "content": [_text(10, "new")]})
    return {"model": "claude-sonnet-4-6", "max_tokens": 100,
            "system": [_text(system_words, "s", mark=True, ttl=ttl)], "messages": messages}


def test_a_conversation_writes_then_reads_what_it_wrote() -> None:
    cache = BreakpointCache(profile("anthropic-5m"), _words, model="claude-sonnet-4-6")
    first = cache.bill(_payload(0), at=0, input_price=3.0)
    assert first.breakpoints == ("system[0]",) and first.breakpoint_tokens == (2000,)
    assert (first.bill.read_tokens, first.bill.written_tokens,
            first.bill.uncached_tokens) == (0, 2000, 10)
    second = cache.bill(_payload(1), at=10, input_price=3.0)
    assert second.breakpoints == ("system[0]", "messages[1].content[0]")
    # the system prompt is read; the first exchange is written; the new message is not cached
    assert (second.bill.read_tokens, second.bill.written_tokens,
            second.bill.uncached_tokens) == (2000, 100, 10)
    third = cache.bill(_payload(2), at=20, input_price=3.0)
    assert (third.bill.read_tokens, third.bill.written_tokens) == (2100, 100)
    expected = (10 + 2100 * 0.1 + 100 * 1.25) * 3.0 / 1e6
    assert third.bill.cost_usd == pytest.approx(expected)
    assert third.uncached_cost_usd == pytest.approx(2210 * 3.0 / 1e6)


def test_an_entry_expires_after_its_ttl_and_a_read_refreshes_it() -> None:
    cache = BreakpointCache(profile("anthropic-5m"), _words, model="claude-sonnet-4-6")
    cache.bill(_payload(0), at=0, input_price=3.0)
    assert cache.bill(_payload(0), at=290, input_price=3.0).bill.read_tokens == 2000
    assert cache.bill(_payload(0), at=580, input_price=3.0).bill.read_tokens == 2000  # refreshed
    late = cache.bill(_payload(0), at=900, input_price=3.0)
    assert (late.bill.read_tokens, late.bill.written_tokens) == (0, 2000)
    hour = BreakpointCache(profile("anthropic-1h"), _words, model="claude-sonnet-4-6")
    hour.bill(_payload(0, ttl="1h"), at=0, input_price=3.0)
    kept = hour.bill(_payload(0, ttl="1h"), at=3000, input_price=3.0)
    assert kept.bill.read_tokens == 2000


def test_a_breakpoint_below_the_minimum_caches_nothing() -> None:
    opus = BreakpointCache(profile("anthropic-5m"), _words, model="claude-opus-4-6")  # 4,096
    for at in (0, 1):
        bill = opus.bill(_payload(0), at=at, input_price=3.0).bill
        assert (bill.read_tokens, bill.written_tokens, bill.uncached_tokens) == (0, 0, 2010)


def test_a_hit_is_found_up_to_twenty_blocks_before_a_breakpoint() -> None:
    cache = BreakpointCache(profile("anthropic-5m"), _words, model="claude-sonnet-4-6")
    cache.bill(_payload(0), at=0, input_price=3.0)
    near = _payload(5)
    near["system"] = [_text(2000, "s")]  # its only breakpoint: 10 blocks past the system's
    assert cache.bill(near, at=1, input_price=3.0).bill.read_tokens == 2000
    cache = BreakpointCache(profile("anthropic-5m"), _words, model="claude-sonnet-4-6")
    cache.bill(_payload(0), at=0, input_price=3.0)
    far = _payload(11)
    far["system"] = [_text(2000, "s")]  # no breakpoint on the system prompt this time
    assert cache.bill(far, at=1, input_price=3.0).bill.read_tokens == 0  # 22 blocks back


def test_the_cache_marker_is_not_part_of_the_prefix() -> None:
    marked, plain = _payload(1), _payload(1)
    plain["system"] = [_text(2000, "s")]
    a, b = blocks_of(marked, _words), blocks_of(plain, _words)
    assert [x.digest for x in a] == [x.digest for x in b]
    assert [x.marked for x in a] != [x.marked for x in b]


def test_reported_usage_is_billed_as_reported() -> None:
    pricing = profile("anthropic-5m")
    bill = pricing.bill_usage(10, 3000, 1200, 3.0)
    assert bill.prompt_tokens == 4210
    assert bill.cost_usd == pytest.approx((10 + 300 + 1500) * 3.0 / 1e6)
    assert profile("anthropic-1h").bill_usage(0, 0, 1000, 3.0).cost_usd == \
        pytest.approx(2000 * 3.0 / 1e6)
    long = pricing.bill_usage(250_000, 0, 0, 3.0)
    assert long.cost_usd == pytest.approx(250_000 * 2 * 3.0 / 1e6)
    usage = {"input_tokens": 10, "cache_read_input_tokens": 3000,
             "cache_creation_input_tokens": 1200, "output_tokens": 5}
    assert reported_split({"usage": usage}) == (10, 3000, 1200)
    # llama-server reports reads but no writes: not a bill of Anthropic's kind
    assert reported_split({"usage": {"input_tokens": 5, "cache_read_input_tokens": 9}}) is None
    assert reported_split({"usage": "not reported by the server"}) is None
    call = ModelCall(id="call_1", conversation_id="c", branch="main", turn=1, head_seq=1,
                     reply_seq=2, status=CallStatus.OK, model="anthropic:claude-sonnet-4-6",
                     request=None, response={"text": "x", "usage": usage},
                     usage=Usage(4210, 3000, 5), timings=Timings(1.0, 2.0),
                     started_at=datetime(2026, 12, 1, tzinfo=UTC))
    (row,) = reuse_of([call], pricing, 3.0)
    assert row.from_usage and row.cost_usd == pytest.approx(bill.cost_usd)
    assert row.to_json()["billed_from"] == "reported usage"
