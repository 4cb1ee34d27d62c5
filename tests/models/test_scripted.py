from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from threadline.models.scripted import (
    TOKEN_PATTERN,
    ScriptedModel,
    render_chatml,
    scripted_rendering,
    scripted_tokens,
    token_id,
)
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


@given(st.lists(st.lists(st.text(max_size=30), min_size=1, max_size=5), min_size=1,
                max_size=4))
def test_the_rendering_built_from_nothing_is_the_one_the_model_records(
        turns: list[list[str]]) -> None:
    model = ScriptedModel(["ok"] * len(turns))  # renders each on the previous one's parts
    history: list[str] = []
    for texts in turns:
        history += texts
        request = _request(*history)
        sent = model.complete(request).sent.rendering
        assert sent is not None
        fresh = scripted_rendering(request.messages)
        assert (fresh.prompt, fresh.tokens, fresh.per_message) == (sent.prompt, sent.tokens, True)
        assert [p.bytes_end for p in fresh.parts] == [p.bytes_end for p in sent.parts]


@given(st.lists(st.tuples(st.integers(0, 2), st.text(max_size=20)), min_size=1, max_size=12))
def test_interleaved_conversations_render_exactly_and_share_one_kv_cache(
        steps: list[tuple[int, str]]) -> None:
    """Conversations taking turns on one model: each request is rendered on its own
    conversation's last parts, yet what is "cached" is only what the previous request, of
    whichever conversation, left behind (one sequence, as llama.cpp keeps it)."""
    model = ScriptedModel()
    histories: list[list[str]] = [[f"conversation {n}"] for n in range(3)]
    previous: tuple[str, tuple[int, ...]] | None = None
    for which, text in steps:
        history = histories[which]
        history.append(text)
        request = _request(*history)
        completion = model.complete(request)
        sent = completion.sent.rendering
        assert sent is not None
        fresh = scripted_rendering(request.messages)
        assert (sent.prompt, sent.tokens) == (fresh.prompt, fresh.tokens)
        tokens = sent.tokens or ()
        expected = 0
        if previous is not None:
            before, reply = previous
            kept = (*before, *reply)  # the previous prompt and its reply, evaluated
            while expected < min(len(kept), len(tokens)) and \
                    kept[expected] == tokens[expected]:
                expected += 1
        assert completion.usage.cached_tokens == min(expected, max(len(tokens) - 1, 0))
        history.append(completion.text)
        previous = (tokens, tuple(map(token_id, scripted_tokens(completion.text))))


def test_a_conversations_next_request_renders_only_its_new_messages(monkeypatch) -> None:
    """Three conversations taking turns: each request renders what its conversation added
    since its own last request, not its whole history again."""
    from threadline.models import scripted

    rendered: list[str] = []
    render = scripted._render
    monkeypatch.setattr(scripted, "_render", lambda m: rendered.append(m.content) or render(m))
    model = ScriptedModel()
    histories = [["shared opening", f"conversation {n}"] for n in range(3)]
    for turn in range(4):
        for n, history in enumerate(histories):
            rendered.clear()
            reply = model.complete(_request(*history)).text
            assert rendered == (history if turn == 0 and n == 0 else
                                history[1:] if turn == 0 else history[-2:])
            history += [reply, f"turn {turn} of {n}"]


def test_it_keeps_only_its_latest_requests(monkeypatch) -> None:
    """A long-running demo server over the scripted model does not grow with every request."""
    from threadline.models import scripted

    monkeypatch.setattr(scripted, "REQUESTS_KEPT", 3)
    model = ScriptedModel()
    sent = [_request(f"message {n}") for n in range(5)]
    for request in sent:
        model.complete(request)
    assert model.requests == sent[2:]


def test_conversations_of_the_same_texts_each_keep_their_own_rendering(tmp_path,
                                                                      monkeypatch) -> None:
    """Conversations saying the same things take turns: each request still builds on its own
    conversation's last one, whose history its chained hashes prove at once, and never
    supersedes another conversation's (which would leave that conversation's next request
    to be compared with this one message by message)."""
    from threadline.engine import Engine
    from threadline.models import scripted
    from threadline.stores.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "same.db")
    model = ScriptedModel()
    engine = Engine(store, model)
    bases: list[bool] = []
    shared = scripted._shared

    def watched(kept, messages, mark):  # type: ignore[no-untyped-def]
        bases.append(scripted._same_log(kept.mark, mark))
        return shared(kept, messages, mark)

    monkeypatch.setattr(scripted, "_shared", watched)
    cids: list[str | None] = [None, None]
    for turn in range(6):
        for n in range(2):
            cids[n] = engine.run_turn(f"the same words ({turn})",
                                      conversation_id=cids[n]).conversation_id
    kept = {k.mark.conversation_id for k in model._rendered if k.mark is not None}
    assert kept == set(cids)
    assert bases[-4:] == [True] * 4  # its own conversation's request, found first
    store.close()
