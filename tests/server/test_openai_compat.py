"""The OpenAI-compatible front, driven by the official ``openai`` SDK: the client sends only
the new message and the server keeps the history."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from openai import BadRequestError, NotFoundError, OpenAI

from threadline.engine import Engine
from threadline.models.scripted import ScriptedModel
from threadline.server.app import create_app
from threadline.stores.base import Store


@pytest.fixture
def sdk(store: Store) -> OpenAI:
    http = TestClient(create_app(Engine(store, ScriptedModel())))
    return OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=http,
                  max_retries=0)


def test_the_server_keeps_the_history(sdk: OpenAI, store: Store) -> None:
    raw = sdk.chat.completions.with_raw_response.create(
        model="any", messages=[{"role": "system", "content": "You are terse."},
                               {"role": "user", "content": "My name is Ada."}])
    cid = raw.headers["X-Threadline-Conversation"]
    first = raw.parse()
    assert first.choices[0].message.content.startswith("(scripted reply 1)")
    second = sdk.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "What is my name?"}],
        metadata={"conversation_id": cid})
    assert second.choices[0].message.content.startswith("(scripted reply 2)")
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details.cached_tokens > 0  # the prefix was reused
    assert [i.text for i in store.history(cid)][0::2] == ["My name is Ada.",
                                                          "What is my name?"]
    assert store.conversation(cid).system == "You are terse."
    calls = store.calls(cid)
    assert second.id == f"chatcmpl-{calls[-1].id}"


def test_streaming_and_idempotent_retries(sdk: OpenAI, store: Store) -> None:
    stream = sdk.chat.completions.create(model="any", stream=True,
                                         messages=[{"role": "user", "content": "Stream it"}])
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("(scripted reply 1)")
    assert chunks[-1].choices[0].finish_reason == "stop"
    cid = chunks[-1].model_extra["threadline"]["conversation_id"]  # type: ignore[index]
    once = sdk.chat.completions.create(model="any", metadata={"conversation_id": cid},
                                       messages=[{"role": "user", "content": "Pay"}],
                                       extra_headers={"Idempotency-Key": "pay-1"})
    again = sdk.chat.completions.create(model="any", metadata={"conversation_id": cid},
                                        messages=[{"role": "user", "content": "Pay"}],
                                        extra_headers={"Idempotency-Key": "pay-1"})
    assert again.id == once.id
    assert sum(1 for i in store.history(cid) if i.text == "Pay") == 1


def test_refusals_reach_the_sdk_as_errors_and_change_nothing(sdk: OpenAI,
                                                             store: Store) -> None:
    with pytest.raises(NotFoundError):
        sdk.chat.completions.create(model="any", metadata={"conversation_id": "c_missing"},
                                    messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(BadRequestError, match="last message must be the new one"):
        sdk.chat.completions.create(model="any",
                                    messages=[{"role": "system", "content": "only this"}])
    assert store.conversations() == []
