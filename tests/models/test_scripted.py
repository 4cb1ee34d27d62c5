from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from threadline.models.scripted import TOKEN_PATTERN, ScriptedModel, render_chatml, scripted_tokens
from threadline.request import Message, Request, Segment, SegmentKind, Stability


def _request(*texts: str) -> Request:
    messages = tuple(Message("user" if i % 2 == 0 else "assistant", t)
                     for i, t in enumerate(texts))
    return Request(tools=(), segments=(Segment(SegmentKind.HISTORY, Stability.CONVERSATION,
                                               messages),))


def test_replies_come_from_the_queue_then_the_default() -> None:
    model = ScriptedModel(["queued"])
    assert model.complete(_request("a")).text == "queued"
    assert model.complete(_request("a", "queued", "b")).text == \
        "(scripted reply 2) You said: b"


def test_it_streams_and_reports_its_prefix_cache_like_llama_cpp() -> None:
    model = ScriptedModel(["one two three"])
    pieces: list[str] = []
    first = model.complete(_request("hello"), on_text=pieces.append)
    assert "".join(pieces) == "one two three"
    assert first.usage.cached_tokens == 0
    second = model.complete(_request("hello", "one two three", "next"))
    assert second.usage.cached_tokens > first.usage.prompt_tokens
    assert second.sent.prompt == render_chatml(_request("hello", "one two three", "next"))
    unrelated = model.complete(_request("something else entirely"))
    # only the role header is shared
    assert unrelated.usage.cached_tokens == len(scripted_tokens("<|im_start|>user\n"))


@given(st.lists(st.text(max_size=40), min_size=1, max_size=6))
def test_message_by_message_tokens_equal_whole_prompt_tokens(texts: list[str]) -> None:
    model = ScriptedModel(["ok"])
    request = _request(*texts)
    completion = model.complete(request)
    assert completion.usage.prompt_tokens == len(TOKEN_PATTERN.findall(render_chatml(request)))
