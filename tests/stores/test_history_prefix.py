"""The O(new) prefix check: a shared history is confirmed by its chained hashes at the
boundary, never assumed, and every delta and prefix report stays what a full comparison
gives."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import threadline.calls as calls
import threadline.stores.delta as delta_module
from threadline.cache.attribution import Previous, report
from threadline.cache.prefix import layout_of
from threadline.calls import Rendering, SentRequest, known_messages
from threadline.engine import Engine
from threadline.items import Item, ItemKind, NewItem, chain_items, next_item
from threadline.models.scripted import ScriptedModel, render_chatml
from threadline.providers.clock import TimeProvider
from threadline.request import Request, TailBlock
from threadline.sequences import common_prefix_len
from threadline.stores.delta import decode, encode
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.assemble import MessageMemo, assemble

_T = datetime(2026, 12, 1, tzinfo=UTC)


def _chain(*new: NewItem) -> list[Item]:
    return chain_items("c_p", new, created_at=_T)


def _then(history: list[Item], *new: NewItem) -> list[Item]:
    out = list(history)
    for item in new:
        out.append(next_item(out, item))
    return out


def _turns(n: int, prefix: str = "m") -> list[NewItem]:
    return [x for i in range(n) for x in (NewItem.user(f"{prefix} question {i}"),
                                          NewItem.assistant(f"{prefix} answer {i}"))]


class Sender:
    """Assembles and sends as an engine does: one message memo, one scripted model, so
    consecutive requests share message and part objects."""

    def __init__(self, shape: str = "rendered") -> None:
        self.memo, self.model, self.shape = MessageMemo(), ScriptedModel(), shape

    def send(self, history: list[Item], **kwargs: Any) -> tuple[Request, SentRequest]:
        request = assemble(history, memo=self.memo, **kwargs)
        self.model.enqueue("ok")
        sent = self.model.complete(request).sent
        if self.shape == "messages":
            sent = replace(sent, rendering=None)
        return request, sent


def _unmarked(sent: SentRequest) -> SentRequest:
    return replace(sent, history=None)


def _through_storage(request: SentRequest, base: SentRequest | None) -> dict:
    return json.loads(json.dumps(encode(request, base)))


def _assert_exact(before: SentRequest, after: SentRequest, before_request: Request,
                  after_request: Request) -> None:
    """The delta and the prefix report are what the full comparison gives, and the delta
    decodes to the request byte for byte."""
    delta = _through_storage(after, before)
    assert delta == _through_storage(_unmarked(after), _unmarked(before))
    assert decode([delta, _through_storage(before, None)]) == after
    assert delta["messages"]["keep"] == common_prefix_len(before.messages, after.messages)
    previous = Previous("call_prev", before, layout_of(before_request))
    fast = report(after, after_request, previous).to_json()
    slow = report(_unmarked(after), after_request,
                  Previous("call_prev", _unmarked(before), layout_of(before_request))).to_json()
    assert fast == slow


@pytest.mark.parametrize("shape", ["messages", "rendered"])
def test_an_appended_turn_is_confirmed_at_the_boundary(shape: str) -> None:
    sender = Sender(shape)
    history = _chain(*_turns(30), NewItem.user("now"))
    first_request, first = sender.send(history, system="be brief")
    history = _then(history, NewItem.assistant("sure"), NewItem.user("and then"))
    second_request, second = sender.send(history, system="be brief")
    # the system message and the 60 history messages of the first request, shown by hashes
    assert known_messages(first, second) == 61
    _assert_exact(first, second, first_request, second_request)


@pytest.mark.parametrize("shape", ["messages", "rendered"])
def test_the_store_and_the_report_visit_only_what_is_new(
        shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sender = Sender(shape)
    history = _chain(*_turns(500), NewItem.user("now"))
    first_request, first = sender.send(history, tail=[TailBlock("time", "12:00")])
    history = _then(history, NewItem.assistant("sure"), NewItem.user("and then"))
    second_request, second = sender.send(history, tail=[TailBlock("time", "12:01")])
    compared: list[int] = []

    def counting(a: Any, b: Any) -> int:
        compared.append(max(len(a), len(b)))
        return common_prefix_len(a, b)

    monkeypatch.setattr(calls, "common_prefix_len", counting)
    delta = encode(second, first)
    result = report(second, second_request, Previous("p", first, layout_of(first_request)))
    # the 1,000 history messages (and their rendered parts) are never compared: only the
    # tails: a few messages, or their JSON (some 170 characters of some 45,000)
    assert compared and max(compared) < 200
    assert delta["messages"]["keep"] == 1000
    assert str(result.cause) == "tail_replaced"
    monkeypatch.undo()
    _assert_exact(first, second, first_request, second_request)


def test_a_rewritten_history_of_the_same_length_is_not_taken_as_equal() -> None:
    sender = Sender()
    turns = _turns(20)
    history = _chain(*turns, NewItem.user("now"))
    first_request, first = sender.send(history)
    tampered = list(turns)
    tampered[6] = NewItem.user("m question 3, edited")  # same length, same layout
    other = _then(_chain(*tampered, NewItem.user("now")), NewItem.assistant("sure"),
                  NewItem.user("and then"))
    second_request, second = sender.send(other)
    assert known_messages(first, second) == 0
    assert common_prefix_len(first.messages, second.messages) == 6
    _assert_exact(first, second, first_request, second_request)


def test_a_history_that_reaches_the_same_hash_by_another_item_is_not_taken_as_equal() -> None:
    """A fork that repeats a tool result reaches the same chained hash under another seq. The
    hash does not cover the seq, but a cleared result's placeholder names it: on main the
    result shows as a placeholder (a compaction cleared it); on the fork, whose copy of that
    compaction names main's seq, it shows verbatim."""
    main = _chain(NewItem.user("look it up"), NewItem.tool_call("k1", "search", {"q": "x"}),
                  NewItem.tool_result("k1", "a long result " * 20))
    compaction = NewItem(ItemKind.COMPACTION, {"strategy": "clear_tool_results",
                                               "cleared": [3], "pinned": []})
    main = _then(main, compaction, NewItem.user("next"))
    result = replace(main[2], seq=6, parent_seq=2, branch="fork")  # same hash, another seq
    fork = _then(main[:2] + [result], compaction, NewItem.user("next"))
    assert fork[2].hash == main[2].hash and fork[3].hash == main[3].hash
    sender = Sender()
    main_request, on_main = sender.send(main)
    fork_request, on_fork = sender.send(fork)
    assert on_main.messages[2] != on_fork.messages[2]  # placeholder against the verbatim result
    assert known_messages(on_main, on_fork) == 0
    _assert_exact(on_main, on_fork, main_request, fork_request)


@pytest.mark.parametrize("change", ["system", "compaction", "fork", "edit", "static"])
def test_a_changed_request_falls_back_and_stays_exact(change: str) -> None:
    sender = Sender()
    history = _chain(NewItem.user("run it"), NewItem.tool_call("k1", "run", {}),
                     NewItem.tool_result("k1", "output " * 30), *_turns(5), NewItem.user("now"))
    first_request, first = sender.send(history, system="s1", static=["doc"])
    options: dict[str, Any] = {"system": "s1", "static": ["doc"]}
    later = _then(history, NewItem.assistant("sure"), NewItem.user("and then"))
    if change == "system":
        options["system"] = "s2"
    elif change == "static":
        options["static"] = ["another doc"]
    elif change == "compaction":
        later = _then(later, NewItem(ItemKind.COMPACTION, {
            "strategy": "clear_tool_results", "cleared": [3], "pinned": []}))
    elif change == "fork":  # from item 5: the first request's history does not lead it
        later = _then(history[:5], NewItem.assistant("elsewhere"), NewItem.user("then"))
    else:  # an edit of the first message: every hash after it changes
        later = _then(_chain(NewItem.user("run it, edited"), *[
            NewItem(i.kind, i.content) for i in history[1:]]), NewItem.assistant("sure"),
            NewItem.user("and then"))
    second_request, second = sender.send(later, **options)
    assert known_messages(first, second) == 0
    _assert_exact(first, second, first_request, second_request)


def test_a_mark_is_used_only_for_the_messages_it_describes() -> None:
    sender = Sender("messages")
    history = _chain(*_turns(10), NewItem.user("now"))
    first_request, first = sender.send(history)
    history = _then(history, NewItem.assistant("sure"), NewItem.user("and then"))
    second_request, second = sender.send(history)
    copied = replace(second, messages=tuple(dict(m) for m in second.messages))
    assert known_messages(first, second) == 20
    assert known_messages(first, copied) == 0  # not the dicts the mark's messages give
    _assert_exact(first, copied, first_request, second_request)


_params = st.dictionaries(st.sampled_from(["max_tokens", "model", "tools", "stream", "a", "z"]),
                          st.integers(0, 9) | st.text(max_size=4), max_size=4)
_message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                  "content": st.text(max_size=8)})


@settings(max_examples=300, deadline=None)
@given(st.lists(_message, max_size=5), st.lists(_message, max_size=4),
       st.lists(_message, max_size=4), _params, _params, st.integers(0, 5))
def test_a_payload_measured_from_its_tail_is_measured_exactly(
        common: list, mine: list, theirs: list, my_params: dict, their_params: dict,
        known: int) -> None:
    """Whatever the params (keys before and after "messages", a "model" param), a payload
    measured from the first ``known`` shared messages on is what serialising it whole gives."""
    known = min(known, len(common))
    a = SentRequest("m", tuple(common + mine), my_params)
    b = SentRequest("m", tuple(common + theirs), their_params)
    shared = a.payload_shared(b, known)
    text, old = a.payload_json(), b.payload_json()
    chars = common_prefix_len(old, text)
    assert (shared.chars, shared.bytes) == (chars, len(text[:chars].encode("utf-8")))
    assert a.payload_size() == (len(text), len(text.encode("utf-8")))


@pytest.mark.parametrize("other", ["whole prompt", "another model"])
def test_rendered_parts_are_skipped_only_where_they_render_one_message_each(
        other: str) -> None:
    """A backend that renders the whole prompt at once (llama.cpp) has no part per message,
    and another model renders the same messages into other parts: the shared messages say
    nothing about the parts there, and the prompts are compared."""
    sender = Sender()
    history = _chain(*_turns(10), NewItem.user("now"))
    first_request, first = sender.send(history)
    history = _then(history, NewItem.assistant("sure"), NewItem.user("and then"))
    second_request, second = sender.send(history)
    assert first.rendering is not None and second.rendering is not None
    if other == "whole prompt":
        first = replace(first, rendering=Rendering.of("x" + first.rendering.prompt))
        second = replace(second, rendering=Rendering.of("y" + second.rendering.prompt))
    else:
        first = replace(first, model="another", rendering=Rendering.extend((), [
            ("<" + p.text, p.tokens) for p in first.rendering.parts], per_message=True))
    assert known_messages(first, second) == 20
    _assert_exact(first, second, first_request, second_request)


def test_an_engine_s_turns_are_stored_by_the_boundary_check_and_read_back_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[int] = []

    def spying(before: SentRequest, after: SentRequest) -> int:
        shown.append(known_messages(before, after))
        return shown[-1]

    monkeypatch.setattr(delta_module, "known_messages", spying)
    model = ScriptedModel()
    store = SQLiteStore(tmp_path / "t.db")
    engine = Engine(store, model, system="be brief", providers=[TimeProvider()])
    cid = engine.run_turn("first").conversation_id
    sent = []
    for i in range(4):
        result = engine.run_turn(f"turn {i}", conversation_id=cid)
        sent.append(model.requests[-1])
        assert result.call is not None
    # the system message and the earlier turns' history, confirmed at the boundary (the first
    # request had no history yet)
    assert shown == [1, 3, 5, 7]
    fresh = SQLiteStore(tmp_path / "t.db")  # nothing remembered: every request decoded
    for call, request in zip(fresh.calls(cid)[1:], sent, strict=True):
        read = fresh.call(call.id).request
        assert read is not None and list(read.messages) == request.openai_messages()
        assert read.prompt == render_chatml(request)
    fresh.close()
    store.close()


def test_turn_after_turn_of_messages_alone_no_report_serialises_a_whole_payload(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A request of messages alone (no params, no rendering) keeps the size measured for it, so
    each later report measures only the new tail, turn after turn."""
    sender = Sender("messages")
    history = _chain(*_turns(300), NewItem.user("now"))
    request, sent = sender.send(history)
    previous = Previous("c0", sent, layout_of(request))
    report(sent, request, None)
    sent.payload_size()  # as the engine's first report and the store's record measure it
    whole: list[int] = []
    serialise = SentRequest.payload_json

    def counting(self: SentRequest) -> str:
        text = serialise(self)
        whole.append(len(text))
        return text

    monkeypatch.setattr(SentRequest, "payload_json", counting)
    for n in range(3):
        history = _then(history, NewItem.assistant(f"reply {n}"), NewItem.user(f"next {n}"))
        request, sent = sender.send(history)
        result = report(sent, request, previous)
        assert str(result.cause) == "append_only"
        previous = Previous(f"c{n + 1}", sent, layout_of(request))
    assert whole == []
