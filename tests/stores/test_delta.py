"""Requests stored as deltas read back byte for byte, whatever the sequence of requests."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.cache.prefix import common_prefix_len
from threadline.calls import SentRequest
from threadline.stores.delta import decode, encode

_messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                            "content": st.text(max_size=20)}), max_size=6)
_request = st.builds(
    lambda messages, prompt, tokens: SentRequest(model="m", messages=tuple(messages),
                                                 prompt=prompt, tokens=tokens),
    _messages, st.none() | st.text(max_size=50),
    st.none() | st.lists(st.integers(0, 50), max_size=30).map(tuple))


def _grow(base: SentRequest, extra: SentRequest) -> SentRequest:
    """``extra`` appended to ``base``: the common, append-only case."""
    return SentRequest(model="m", messages=base.messages + extra.messages,
                       prompt=None if base.prompt is None else base.prompt + (extra.prompt or ""),
                       tokens=None if base.tokens is None else base.tokens + (extra.tokens or ()))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _request), min_size=1, max_size=8))
def test_any_chain_of_requests_decodes_exactly(steps: list[tuple[bool, SentRequest]]) -> None:
    chain: list[dict] = []  # newest first, as the store walks it
    previous = None
    for append, step in steps:
        request = _grow(previous, step) if append and previous is not None else step
        delta = json.loads(json.dumps(encode(request, previous)))  # through storage
        chain.insert(0, delta)
        assert decode(chain) == request
        previous = request


def test_an_append_only_request_stores_only_its_new_tail() -> None:
    first = SentRequest(model="m", messages=({"role": "user", "content": "a" * 1000},),
                        prompt="p" * 1000, tokens=tuple(range(1000)))
    second = _grow(first, SentRequest(model="m", messages=({"role": "user", "content": "b"},),
                                      prompt="q", tokens=(7,)))
    delta = encode(second, first)
    assert delta["messages"]["keep"] == 1 and len(delta["messages"]["tail"]) == 1
    assert delta["prompt"] == {"keep": 1000, "tail": "q"}
    assert delta["tokens"] == {"keep": 1000, "tail": (7,)}


@given(st.text(max_size=10_000), st.text(max_size=10_000))
def test_common_prefix_len_matches_a_plain_scan(a: str, b: str) -> None:
    expected = 0
    while expected < min(len(a), len(b)) and a[expected] == b[expected]:
        expected += 1
    assert common_prefix_len(a, b) == expected
    shared = a + b
    assert common_prefix_len(shared, shared + "x") == len(shared)
