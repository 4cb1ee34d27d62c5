"""Request fields rebuilt a call at a time from stored deltas (``stores/delta_fields.py``) are
what the store's own decoding rebuilds (``stores/delta.py``), whatever the texts hold: quotes,
backslashes, and the very key names the prompt is found by."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.calls import Rendering, SentRequest
from threadline.errors import StoreError
from threadline.items import canonical_json
from threadline.stores.delta import decode, encode
from threadline.stores.delta_fields import DeltaFields, _prompt_part

_TRICKY = st.sampled_from([',"tokens":', ',"prompt":', '"', "\\", '\\",\\"tokens\\":',
                           '{"keep":1,"tail":"x"}', "\n", "é", "😀", ""])
_text = st.lists(_TRICKY | st.text(max_size=6), max_size=4).map("".join)
_messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                            "content": _text}), max_size=4)
_pieces = st.lists(st.tuples(_text, st.lists(st.integers(0, 50), max_size=4).map(tuple)),
                   max_size=4)
_rendering = st.none() | st.builds(lambda pieces, with_tokens: Rendering.extend(
    (), pieces, has_tokens=with_tokens), _pieces, st.booleans())
_request = st.builds(lambda messages, rendering, params: SentRequest(
    model="m", messages=tuple(messages), rendering=rendering, params=params),
    _messages, _rendering, st.just({}) | st.just({"prompt": "p", "tokens": 3}))


def _grow(base: SentRequest, extra: SentRequest) -> SentRequest:
    rendering = base.rendering
    if rendering is not None:
        added = () if extra.rendering is None else extra.rendering.parts
        rendering = Rendering.extend(rendering.parts, [(p.text, p.tokens) for p in added],
                                     has_tokens=rendering.has_tokens)
    return SentRequest(model="m", messages=base.messages + extra.messages,
                       rendering=rendering, params=base.params)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3), _request), min_size=1,
                max_size=10))
def test_each_call_rebuilds_as_the_store_decodes_it(
        steps: list[tuple[bool, int, SentRequest]]) -> None:
    stored: dict[str, tuple[str | None, str]] = {}
    requests: list[SentRequest] = []
    for n, (append, back, step) in enumerate(steps):
        base_at = max(0, len(requests) - 1 - back) if requests else None
        base = None if base_at is None else requests[base_at]
        request = _grow(base, step) if append and base is not None else step
        stored[f"c{n}"] = (None if base_at is None else f"c{base_at}",
                           canonical_json(encode(request, base)))
        requests.append(request)
    fields = DeltaFields(stored)
    for n in range(len(requests)):
        chain: list[dict] = []  # newest first, as the store walks it
        current: str | None = f"c{n}"
        while current is not None:
            chain.append(json.loads(stored[current][1]))
            current = stored[current][0]
        expected = decode(chain)
        prompt = fields.whole(f"c{n}", "prompt")
        assert prompt == (None if expected.rendering is None else expected.rendering.prompt)
        assert tuple(fields.whole(f"c{n}", "messages") or ()) == expected.messages


@settings(max_examples=300, deadline=None)
@given(_request)
def test_the_prompt_alone_is_the_prompt_of_the_whole_delta(request: SentRequest) -> None:
    text = canonical_json(encode(request, None))
    part = _prompt_part(text)
    whole = json.loads(text)["prompt"]
    assert part == whole or (part is None and whole is None)


def test_a_delta_the_prompt_cannot_be_found_in_is_decoded_whole() -> None:
    text = '{"messages":null,"model":"m","params":{},"prompt":{"keep":0,"tail":"a"}}'
    assert _prompt_part(text) is None  # no tokens key: not the stored layout
    assert DeltaFields({"c": (None, text)}).whole("c", "prompt") == "a"


def test_a_missing_base_is_a_damaged_log() -> None:
    stored = {"a": (None, canonical_json(encode(SentRequest(model="m", messages=()), None))),
              "b": ("a", '{"messages":{"keep":0,"tail":[]},"model":"m","params":{},'
                         '"prompt":{"keep":5,"tail":"x"},"tokens":null}')}
    with pytest.raises(StoreError, match="damaged"):
        DeltaFields(stored).whole("b", "prompt")
