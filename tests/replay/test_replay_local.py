"""Replay of calls the real local model made (SmolLM2-135M through llama.cpp)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require_llama_cpp
from threadline.engine import Engine
from threadline.replay import calls_to_replay, replay
from threadline.stores.sqlite import SQLiteStore

require_llama_cpp()
from threadline.models.llamacpp import LlamaCppModel, Sampling  # noqa: E402

pytestmark = pytest.mark.local_model


def test_local_calls_replay_by_messages_and_with_the_model_by_their_prompt(
        tmp_path: Path) -> None:
    model = LlamaCppModel(sampling=Sampling(temperature=0.0, max_tokens=12, seed=7))
    store = SQLiteStore(tmp_path / "t.db")
    engine = Engine(store, model, system="You are terse.")
    cid = engine.run_turn("Name a colour.").conversation_id
    engine.run_turn("And another one?", conversation_id=cid)
    store.close()
    store = SQLiteStore(tmp_path / "t.db")
    try:
        calls = calls_to_replay(store, cid)
        alone = list(replay(Engine(store, model, system="You are terse."), calls))
        assert [(r.outcome, r.compared) for r in alone] == [("same", "messages")] * 2
        # with the model that made them: its own template renders the prompt, compared
        # byte for byte and token for token, and greedy decoding answers as it did
        rerun = list(replay(Engine(store, model, system="You are terse."), calls,
                            model=model))
        assert [(r.outcome, r.compared) for r in rerun] == [("same", "bytes")] * 2
        assert all(r.answer is not None and r.answer.same for r in rerun), \
            [r.answer for r in rerun]
    finally:
        store.close()
