"""The real local model: SmolLM2-135M through llama.cpp, in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_llama_cpp
from threadline.engine import Engine
from threadline.errors import ContextWindowExceeded
from threadline.providers.query import rewrite
from threadline.stores.sqlite import SQLiteStore

require_llama_cpp()
from threadline.models.llamacpp import LlamaCppModel, Sampling  # noqa: E402

pytestmark = pytest.mark.local_model


@pytest.fixture(scope="module")
def local() -> LlamaCppModel:
    return LlamaCppModel(sampling=Sampling(temperature=0.0, max_tokens=24, seed=7))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "t.db")
    yield store
    store.close()


def test_a_conversation_reuses_the_previous_turn_from_the_kv_cache(
        local: LlamaCppModel, store: SQLiteStore) -> None:
    engine = Engine(store, local)
    pieces: list[str] = []
    first = engine.run_turn("Name one colour.", on_text=pieces.append)
    assert first.reply.text and "".join(pieces) == first.reply.text
    second = engine.run_turn("Name another.", conversation_id=first.conversation_id)
    one, two = store.call(first.call.id), store.call(second.call.id)
    assert one.request is not None and two.request is not None
    assert one.request.tokens is not None and two.request.tokens is not None
    assert len(two.request.tokens) == two.usage.prompt_tokens
    # the template renders turn 2 as turn 1's prompt plus the reply plus the new message
    assert two.request.prompt is not None and one.request.prompt is not None
    assert two.request.prompt.startswith(one.request.prompt + first.reply.text)
    assert two.request.tokens[: len(one.request.tokens)] == one.request.tokens
    assert two.usage.cached_tokens >= one.usage.prompt_tokens
    assert two.usage.cached_tokens < two.usage.prompt_tokens
    assert one.usage.completion_tokens == len(one.response["tokens"]) > 0
    assert two.timings.ttft_ms is not None and two.timings.total_ms >= two.timings.ttft_ms


def test_the_chat_template_comes_from_the_gguf(local: LlamaCppModel, store: SQLiteStore) -> None:
    result = Engine(store, local, system="You answer in French.").run_turn("Hello")
    call = store.call(result.call.id)
    assert call.request is not None and call.request.prompt == (
        "<|im_start|>system\nYou answer in French.<|im_end|>\n"
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n")
    assert call.model == "llama.cpp:SmolLM2-135M-Instruct.Q4_1"


def test_a_request_over_the_context_window_is_refused_and_recorded(
        local: LlamaCppModel, store: SQLiteStore) -> None:
    small = LlamaCppModel(n_ctx=256, sampling=Sampling(max_tokens=16))
    with pytest.raises(ContextWindowExceeded):
        Engine(store, small).run_turn("word " * 400)
    (summary,) = store.conversations()
    assert summary.items == 1 and summary.calls == 1


def test_the_cli_runs_a_turn_with_the_local_model_across_processes(tmp_path: Path) -> None:
    env = {**os.environ, "THREADLINE_HOME": str(tmp_path / "home")}

    def once(*args: str) -> dict[str, object]:
        run = subprocess.run([sys.executable, "-m", "threadline", "chat", "--model", "local",
                              "--once", *args, "--json"], env=env, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        return dict(json.loads(run.stdout))

    first = once("Say hello.")
    second = once("Say goodbye.", "--conversation", str(first["conversation_id"]))
    assert second["turn"] == 2 and second["reply"]
    usage = second["usage"]
    assert isinstance(usage, dict)
    # a fresh process has a cold KV cache; the history itself came from the log
    assert usage["cached_tokens"] == 0
    assert usage["prompt_tokens"] > first["usage"]["prompt_tokens"]  # type: ignore[index]


def test_the_rewrite_hop_races_the_local_model_and_never_stalls(local: LlamaCppModel,
                                                                store: SQLiteStore) -> None:
    engine = Engine(store, local)
    cid = engine.run_turn("Tell me about Marie Curie's research in 1898.").conversation_id
    result = rewrite(engine, cid, "What did she discover that year?", deadline_s=1.0)
    assert result.latency_ms < 1_500  # the deadline holds even while the model prefills
    assert result.winner in ("deterministic", "model", "raw")
    assert "1898" in result.rewritten or result.winner == "raw"
    tight = rewrite(engine, cid, "And after that?", deadline_s=0.05)
    assert tight.latency_ms < 500
