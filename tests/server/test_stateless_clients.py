"""Stateless clients: the official ``openai`` SDK resending the whole history on every call
ends in one durable conversation, forks where the client edited or regenerated, and a
history the log does not hold is imported."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from openai import BadRequestError, ConflictError, OpenAI

from threadline.engine import Engine
from threadline.errors import ModelUnavailable
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.server.app import create_app
from threadline.stores.base import MAIN, Store

SYSTEM = {"role": "system", "content": "You are terse."}


class Client:
    """A stateless chat client: it keeps the messages and resends them all every time."""

    def __init__(self, sdk: OpenAI, system: dict[str, str] | None = SYSTEM) -> None:
        self.sdk, self.messages = sdk, [system] if system else []
        self.headers: dict[str, str] = {}
        self.extra: dict[str, Any] = {}

    def say(self, text: str, **kwargs: Any) -> str:
        self.messages.append({"role": "user", "content": text})
        raw = self.sdk.chat.completions.with_raw_response.create(
            model="any", messages=self.messages, **kwargs)
        self.headers = dict(raw.headers)
        reply = raw.parse()
        self.extra = reply.model_extra["threadline"]  # type: ignore[index]
        content = reply.choices[0].message.content or ""
        self.messages.append({"role": "assistant", "content": content})
        return content


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
def sdk(store: Store, model: ScriptedModel) -> OpenAI:
    http = TestClient(create_app(Engine(store, model)))
    return OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=http,
                  max_retries=0)


def _visible(store: Store, cid: str, branch: str = MAIN) -> list[str]:
    return [i.text for i in store.history(cid, branch)
            if i.kind in (ItemKind.USER, ItemKind.ASSISTANT)]


def test_a_resent_history_continues_one_conversation(sdk: OpenAI, store: Store) -> None:
    client = Client(sdk)
    client.say("My name is Ana.")
    cid = client.headers["x-threadline-conversation"]
    assert client.extra["history"]["how"] == "new"
    client.say("What is my name?")
    client.say("And again?")
    assert client.extra["history"] == {"how": "continued", "matched": 4, "fork_from": None}
    assert client.headers["x-threadline-conversation"] == cid
    assert client.headers["x-threadline-branch"] == MAIN
    assert len(store.conversations()) == 1 and len(store.branches(cid)) == 1
    assert _visible(store, cid) == [m["content"] for m in client.messages[1:]]
    assert store.conversation(cid).system == "You are terse."
    calls = store.calls(cid)
    assert [c.turn for c in calls] == [1, 2, 3]
    assert all(c.usage.cached_tokens > 0 for c in calls[1:])  # each request reused the last


def test_an_edited_message_forks_and_the_original_stays(sdk: OpenAI, store: Store) -> None:
    client = Client(sdk)
    client.say("first")
    client.say("second")
    cid = client.headers["x-threadline-conversation"]
    before = _visible(store, cid)
    client.messages[3]["content"] = "second, edited"  # the client's edit: drop what followed
    del client.messages[4:]
    client.messages.pop()  # say() appends the message again
    client.say("second, edited")
    assert client.headers["x-threadline-conversation"] == cid
    branch = client.headers["x-threadline-branch"]
    assert branch != MAIN and client.extra["history"]["how"] == "forked"
    assert _visible(store, cid) == before  # the original is intact
    assert _visible(store, cid, branch) == [m["content"] for m in client.messages[1:]]


def test_a_regenerated_reply_forks_at_the_message_before_it(sdk: OpenAI,
                                                            store: Store) -> None:
    client = Client(sdk)
    client.say("one")
    client.say("two")
    cid = client.headers["x-threadline-conversation"]
    del client.messages[-2:]  # regenerate: resend the same request again
    client.say("two")
    branch = client.headers["x-threadline-branch"]
    assert client.extra["history"]["how"] == "forked" and branch != MAIN
    first_reply = store.history(cid)[1]
    assert store.history(cid, branch)[-3].seq == first_reply.seq  # grows from "one"'s reply
    assert len(store.conversations()) == 1


def test_a_history_the_log_lacks_is_imported_then_answered(sdk: OpenAI, store: Store) -> None:
    client = Client(sdk)
    client.messages += [{"role": "user", "content": "from another app"},
                        {"role": "assistant", "content": "an answer threadline never gave"}]
    client.say("and now?")
    cid = client.headers["x-threadline-conversation"]
    assert client.extra["history"] == {"how": "imported", "matched": 0, "fork_from": None}
    assert _visible(store, cid) == [m["content"] for m in client.messages[1:]]
    assert len(store.calls(cid)) == 1  # the imported reply was never a call
    client.say("continuing")
    assert client.extra["history"]["how"] == "continued"


def test_a_matching_prefix_in_another_conversation_forks_there(sdk: OpenAI,
                                                              store: Store) -> None:
    client = Client(sdk)
    client.say("shared start")
    cid = client.headers["x-threadline-conversation"]
    client.messages.append({"role": "user", "content": "a message the log lacks"})
    client.messages.append({"role": "assistant", "content": "and a reply"})
    client.say("next")
    assert client.headers["x-threadline-conversation"] == cid
    assert client.extra["history"]["matched"] == 2
    assert _visible(store, cid, client.headers["x-threadline-branch"])[2:4] == [
        "a message the log lacks", "and a reply"]


def test_a_failed_turn_resent_is_answered_in_place(sdk: OpenAI, store: Store,
                                                  model: ScriptedModel) -> None:
    client = Client(sdk)
    client.say("hello")
    cid = client.headers["x-threadline-conversation"]
    model.enqueue(ModelUnavailable("the model is down"))
    with pytest.raises(Exception, match="the model is down"):
        client.say("are you there?")
    client.messages.pop()  # the client drops its failed message, then sends it again
    client.say("are you there?")
    assert client.extra["history"]["how"] == "answered"
    assert _visible(store, cid) == [m["content"] for m in client.messages[1:]]
    assert len(store.branches(cid)) == 1


def test_an_idempotent_retry_of_a_resent_history_answers_once(sdk: OpenAI,
                                                              store: Store) -> None:
    client = Client(sdk)
    client.say("hi")
    headers = {"Idempotency-Key": "k-1"}
    first = client.say("pay once", extra_headers=headers)
    del client.messages[-2:]
    again = client.say("pay once", extra_headers=headers)
    assert first == again
    cid = client.headers["x-threadline-conversation"]
    assert len(store.branches(cid)) == 1 and _visible(store, cid).count("pay once") == 1


def test_a_named_conversation_refuses_a_history_that_disagrees(sdk: OpenAI,
                                                               store: Store) -> None:
    client = Client(sdk)
    client.say("a")
    client.say("b")
    cid = client.headers["x-threadline-conversation"]
    client.say("c", metadata={"conversation_id": cid})  # agrees: continues
    assert client.extra["history"]["how"] == "continued"
    before = store.history(cid)
    wrong = [SYSTEM, {"role": "user", "content": "a"},
             {"role": "assistant", "content": "not what was said"},
             {"role": "user", "content": "d"}]
    with pytest.raises(ConflictError) as refused:
        sdk.chat.completions.create(model="any", messages=wrong,  # type: ignore[arg-type]
                                    metadata={"conversation_id": cid})
    error = refused.value.body  # the SDK unwraps {"error": …}
    assert isinstance(error, dict)
    assert error["type"] == "HistoryMismatch"
    assert (error["first_differing_index"], error["matched"]) == (2, 1)
    assert store.history(cid) == before and len(store.branches(cid)) == 1
    forked = sdk.chat.completions.with_raw_response.create(
        model="any", messages=wrong, metadata={"conversation_id": cid},  # type: ignore[arg-type]
        extra_headers={"X-Threadline-On-Mismatch": "fork"})
    branch = forked.headers["x-threadline-branch"]
    assert branch != MAIN
    assert _visible(store, cid, branch)[:3] == ["a", "not what was said", "d"]


def test_a_named_conversation_without_a_system_message_takes_its_own(sdk: OpenAI,
                                                                    store: Store) -> None:
    client = Client(sdk)
    client.say("hello")
    cid = client.headers["x-threadline-conversation"]
    bare = Client(sdk, system=None)
    bare.messages = client.messages[1:]
    bare.say("next", metadata={"conversation_id": cid})
    assert bare.extra["history"]["how"] == "continued"


@pytest.mark.parametrize(("messages", "match"), [
    ([SYSTEM], "last message must be the new one"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
     "last message must be the new one"),
    ([{"role": "user", "content": "q"}, {"role": "tool", "content": "x", "tool_call_id": "1"},
      {"role": "user", "content": "q2"}], "role 'tool'"),
    ([{"role": "user", "content": "q"}, SYSTEM, {"role": "user", "content": "q2"}],
     "after the first message"),
    ([{"role": "user", "content": "   "}], "empty"),
    ([{"role": "user", "content": "q"},
      {"role": "assistant", "content": None,
       "tool_calls": [{"id": "1", "type": "function",
                       "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "user", "content": "q2"}], "with tool calls"),
])
def test_histories_that_cannot_be_placed_are_refused_and_write_nothing(
        sdk: OpenAI, store: Store, messages: list[dict[str, str]], match: str) -> None:
    with pytest.raises(BadRequestError, match=match):
        sdk.chat.completions.create(model="any", messages=messages)  # type: ignore[arg-type]
    assert store.conversations() == []


def test_an_unknown_mismatch_policy_is_refused(store: Store) -> None:
    client = TestClient(create_app(Engine(store, ScriptedModel())))
    response = client.post("/v1/chat/completions", headers={
        "X-Threadline-On-Mismatch": "merge"}, json={
        "model": "any", "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 422 and store.conversations() == []


def test_a_new_conversation_per_first_message(sdk: OpenAI, store: Store) -> None:
    """Two clients that open with the same words are two conversations: a first message
    has no history to match."""
    one, two = Client(sdk), Client(sdk)
    one.say("hi")
    two.say("hi")
    assert one.headers["x-threadline-conversation"] != two.headers["x-threadline-conversation"]


def test_streaming_names_the_branch(sdk: OpenAI, store: Store) -> None:
    client = Client(sdk)
    client.say("one")
    client.messages.append({"role": "user", "content": "two"})
    chunks = list(sdk.chat.completions.create(model="any", messages=client.messages,
                                              stream=True))  # type: ignore[arg-type]
    extra = chunks[-1].model_extra["threadline"]  # type: ignore[index]
    assert extra["history"]["how"] == "continued" and extra["branch"] == MAIN
