"""An imported transcript's empty message is recorded as it was, and never sent as a turn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from threadline.engine import Engine
from threadline.errors import InputError
from threadline.interop.importers import import_transcripts
from threadline.items import ItemKind
from threadline.models.scripted import ScriptedModel
from threadline.render.anthropic import render_anthropic
from threadline.render.openai import render_openai
from threadline.stores.sqlite import SQLiteStore

# the shape seen in real WildChat logs: the user pressed send on nothing, the model greeted
TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": ""},
    {"role": "assistant", "content": "Hello! How can I help you today?"},
    {"role": "user", "content": "Name a colour."},
    {"role": "assistant", "content": "Teal."},
    {"role": "user", "content": "   "},
    {"role": "assistant", "content": "Is there anything else?"},
]


def _import(store: SQLiteStore, messages: list[dict[str, Any]], *, empty: int = 2) -> str:
    report = import_transcripts(store, json.dumps(messages).encode(), "openai-messages",
                                max_message_bytes=100_000)
    (entry,) = report.imported
    assert entry["empty_messages"] == report.empty_messages == empty
    return str(entry["conversation_id"])


def test_every_turn_is_kept_and_the_empty_ones_are_recorded(store: SQLiteStore) -> None:
    cid = _import(store, TRANSCRIPT)
    assert [(i.kind, i.text, i.turn) for i in store.history(cid)] == [
        (ItemKind.USER, "", 1), (ItemKind.ASSISTANT, "Hello! How can I help you today?", 1),
        (ItemKind.USER, "Name a colour.", 2), (ItemKind.ASSISTANT, "Teal.", 2),
        (ItemKind.USER, "   ", 3), (ItemKind.ASSISTANT, "Is there anything else?", 3)]


def test_the_next_turn_sends_no_empty_user_message(store: SQLiteStore, model: ScriptedModel,
                                                   engine: Engine) -> None:
    cid = _import(store, TRANSCRIPT)
    result = engine.run_turn("And a flower?", conversation_id=cid)
    assert result.message.turn == 4
    (request,) = model.requests
    assert request.openai_messages() == [
        {"role": "system", "content": "You are helpful."},
        {"role": "assistant", "content": "Hello! How can I help you today?"},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Teal."},
        {"role": "assistant", "content": "Is there anything else?"},
        {"role": "user", "content": "And a flower?"}]
    payload = render_openai(request, model="m")
    assert all(m["content"].strip() for m in payload["messages"])
    # Anthropic: roles still alternate (adjacent replies share a turn), no empty text block
    turns = render_anthropic(request, model="claude", max_tokens=10)["messages"]
    roles = [t["role"] for t in turns]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
    texts = [b["text"] for t in turns for b in t["content"] if b["type"] == "text"]
    assert "(empty)" not in texts and all(text.strip() for text in texts)


def test_an_empty_message_is_no_turn_to_answer_or_regenerate(store: SQLiteStore,
                                                             engine: Engine,
                                                             model: ScriptedModel) -> None:
    cid = _import(store, [*TRANSCRIPT, {"role": "user", "content": ""}], empty=3)
    last = store.history(cid)[-1]
    before = store.branches(cid)
    with pytest.raises(InputError, match=f"user message {last.seq} of {cid} is empty"):
        engine.answer(cid)
    with pytest.raises(InputError, match="is empty"):
        engine.regenerate(cid, 1)  # nothing is forked for it either
    assert store.branches(cid) == before and model.requests == []
    # it can be given text, on a branch of its own, like any user message
    edited = engine.edit(cid, 1, "Hi there")
    assert edited.message.text == "Hi there" and len(model.requests) == 1


def test_a_summary_does_not_report_an_empty_message_as_said(store: SQLiteStore) -> None:
    from threadline.compaction.summarize import summarize

    cid = _import(store, TRANSCRIPT)
    text = summarize(store.history(cid), previous=None)
    assert "the user said: Name a colour." in text
    assert text.count("the user said") == 1
