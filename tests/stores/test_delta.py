"""Requests stored as deltas read back byte for byte, whatever the sequence of requests."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.calls import Rendering, SentRequest
from threadline.sequences import common_prefix_len
from threadline.stores.delta import decode, encode

_messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                            "content": st.text(max_size=20)}), max_size=6)
_pieces = st.lists(st.tuples(st.text(max_size=12),
                             st.lists(st.integers(0, 50), max_size=6).map(tuple)), max_size=5)
_rendering = st.none() | st.builds(lambda pieces, with_tokens: Rendering.extend(
    (), pieces, has_tokens=with_tokens), _pieces, st.booleans())
_request = st.builds(lambda messages, rendering: SentRequest(
    model="m", messages=tuple(messages), rendering=rendering), _messages, _rendering)


def _grow(base: SentRequest, extra: SentRequest) -> SentRequest:
    """``extra`` appended to ``base``, sharing base's rendered parts (the same objects), as a
    backend that renders message by message builds it: the common, append-only case."""
    rendering = base.rendering
    if rendering is not None:
        added = () if extra.rendering is None else extra.rendering.parts
        rendering = Rendering.extend(rendering.parts, [(p.text, p.tokens) for p in added],
                                     has_tokens=rendering.has_tokens)
    return SentRequest(model="m", messages=base.messages + extra.messages, rendering=rendering)


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
                        rendering=Rendering.of("p" * 1000, range(1000)))
    second = _grow(first, SentRequest(model="m", messages=({"role": "user", "content": "b"},),
                                      rendering=Rendering.of("q", (7,))))
    delta = encode(second, first)
    assert delta["messages"]["keep"] == 1 and len(delta["messages"]["tail"]) == 1
    assert delta["prompt"] == {"keep": 1000, "tail": "q"}
    assert delta["tokens"] == {"keep": 1000, "tail": (7,)}


@settings(max_examples=300, deadline=None)
@given(_pieces, _pieces, _pieces, st.integers(0, 5))
def test_renderings_compare_exactly_whatever_their_parts(common: list, mine: list,
                                                         theirs: list, split: int) -> None:
    """Shared parts, equal parts that are different objects, and parts that split the same
    text differently all give the exact common prefix of the joined prompt and tokens."""
    base = Rendering.extend((), common)
    a = Rendering.extend(base.parts, mine)                  # shares base's part objects
    b = Rendering.extend((), common[:split] + [("".join(t for t, _ in common[split:]),
                         tuple(x for _, ts in common[split:] for x in ts))] + theirs)
    for x, y in ((a, b), (b, a), (a, a), (base, a)):
        shared = x.shared(y)
        assert shared.chars == common_prefix_len(x.prompt, y.prompt)
        assert shared.tokens == common_prefix_len(x.tokens or (), y.tokens or ())
        assert shared.bytes == len(x.prompt[:shared.chars].encode("utf-8"))
        assert x.prompt_from(shared.chars) == x.prompt[shared.chars:]
        assert x.tokens_from(shared.tokens) == (x.tokens or ())[shared.tokens:]
        assert (x == y) == (x.prompt == y.prompt and x.tokens == y.tokens)
    assert (a.chars, a.n_bytes, a.n_tokens) == (len(a.prompt), len(a.prompt.encode("utf-8")),
                                                len(a.tokens or ()))


@given(st.text(max_size=10_000), st.text(max_size=10_000))
def test_common_prefix_len_matches_a_plain_scan(a: str, b: str) -> None:
    expected = 0
    while expected < min(len(a), len(b)) and a[expected] == b[expected]:
        expected += 1
    assert common_prefix_len(a, b) == expected
    shared = a + b
    assert common_prefix_len(shared, shared + "x") == len(shared)
