"""Replaying conversations through assembly policies."""

from __future__ import annotations

from threadline.cache.pricing import profile
from threadline.cache.tokens import WordTokenizer
from threadline.eval.replay import replay
from threadline.items import NewItem


def _conversation(turns: int) -> list[NewItem]:
    out = []
    for n in range(turns):
        out += [NewItem.user(f"Question {n} about the quarterly report, section {n % 3}."),
                NewItem.assistant(f"Answer {n}: " + "revenue grew. " * 30)]
    return out


def test_threadline_reuses_everything_an_append_only_prefix_can() -> None:
    result = replay([("You are an analyst.", _conversation(8)),
                     (None, _conversation(3))], tokenizer=WordTokenizer(),
                    profile=profile("ideal"), input_price=3.0)
    ours = result.policies["threadline"]
    assert ours.requests == 11 and ours.unexplained_misses == 0 and not ours.misses
    assert ours.reused_tokens >= ours.theoretical_reused_tokens > 0
    stamped = result.policies["timestamp-in-system"]
    assert stamped.misses == {"volatile_value_above_tail": 9}
    assert stamped.reused_tokens < ours.reused_tokens / 10
    spliced = result.policies["retrieval-above-history"]
    assert spliced.unexplained_misses == 9
    window = result.policies["sliding-window"]
    assert window.misses == {"history_rewritten": 4}  # turns 5-8 of the long one
    assert ours.cost_usd < window.cost_usd < stamped.cost_usd <= stamped.uncached_cost_usd


def test_an_imported_empty_message_is_no_request() -> None:
    conversation = [NewItem.user(""), NewItem.assistant("Hello! How can I help?"),
                    *_conversation(3)]
    result = replay([(None, conversation)], tokenizer=WordTokenizer(),
                    profile=profile("ideal"), input_price=3.0)
    ours = result.policies["threadline"]
    assert ours.requests == 3 and ours.unexplained_misses == 0 and not ours.misses
