"""Delegation on the real local model (SmolLM2 through llama.cpp): the child's turn is a
real call, and a second child of the same agent reuses the first one's prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require_llama_cpp
from threadline.engine import Engine
from threadline.items import ItemKind
from threadline.stores.sqlite import SQLiteStore

require_llama_cpp()
from threadline.models.llamacpp import LlamaCppModel, Sampling  # noqa: E402
from threadline.turn.delegate import Agent  # noqa: E402

pytestmark = pytest.mark.local_model

HELPER = "You answer questions about colours in one short sentence. " * 6


def test_children_run_on_the_local_model_and_share_their_prefix(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    model = LlamaCppModel(sampling=Sampling(temperature=0.0, max_tokens=12, seed=7))
    helper = Agent("helper", "Answers questions about colours.", HELPER, result_tokens=16)
    engine = Engine(store, model, agents=[helper])
    cid = engine.run_turn("Hello.").conversation_id
    first = engine.delegate(cid, "What colour is the sky?", agent="helper")
    second = engine.delegate(cid, "What colour is grass?", agent="helper")
    assert first.child_id != second.child_id
    for done in (first, second):
        [call] = store.calls(done.child_id)
        assert call.model == model.model_id and call.usage.completion_tokens > 0
        assert done.answer and engine.count(done.answer) <= 16
        assert done.prompt_tokens == call.usage.prompt_tokens
    # the second child's request begins as the first's did: its system prompt is reused
    [later] = store.calls(second.child_id)
    assert later.usage.cached_tokens >= engine.count(HELPER)
    notes = [i for i in store.history(cid) if i.kind is ItemKind.NOTE]
    assert [n.content["delegation"]["child"] for n in notes] == [first.child_id,
                                                               second.child_id]
    store.close()
