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
    assert first["reused_from"] == "none"
    second = once("Say goodbye.", "--conversation", str(first["conversation_id"]))
    assert second["turn"] == 2 and second["reply"]
    usage = second["usage"]
    assert isinstance(usage, dict)
    # the history came from the log, and its KV state from the snapshot the first process
    # left on disk: only the new tokens are prefilled
    assert second["reused_from"] == "disk"
    assert usage["cached_tokens"] >= first["usage"]["prompt_tokens"]  # type: ignore[index]
    assert usage["prompt_tokens"] > first["usage"]["prompt_tokens"]  # type: ignore[index]
    # with the disk tier off, a new process is cold again
    env["THREADLINE_KV_DISK_MB"] = "0"
    cold = once("And again.", "--conversation", str(first["conversation_id"]))
    assert cold["reused_from"] == "none"
    assert cold["usage"]["cached_tokens"] == 0  # type: ignore[index]


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


# -- the KV cache: conversations that interleave, new processes, and restores never trusted --

def _cached_model(folder: Path | None, *, memory: int = 256 << 20) -> LlamaCppModel:
    from threadline.models.kv import KVCache

    return LlamaCppModel(sampling=Sampling(temperature=0.0, max_tokens=16, seed=7),
                         kv=lambda identity: KVCache(identity, memory_bytes=memory,
                                                     folder=folder, disk_bytes=256 << 20))


SYSTEM = "You are a careful assistant for a shipping company. " * 12


def test_interleaved_conversations_each_get_their_own_prefix_back(store: SQLiteStore) -> None:
    model = _cached_model(None)
    engine = Engine(store, model, system=SYSTEM)
    a = engine.run_turn("Where is parcel A-100?")
    b = engine.run_turn("Where is parcel B-200?")  # shares the system prompt with a
    assert b.call.reused_from == "context" and b.call.usage.cached_tokens > 100  # in place
    again = engine.run_turn("And when will it arrive?", conversation_id=a.conversation_id)
    call = store.call(again.call.id)
    assert call.reused_from == "memory"
    # a's own first call, prompt and reply, comes back: only the new message is prefilled
    assert call.usage.cached_tokens >= a.call.usage.prompt_tokens
    assert call.prefix is not None and call.prefix["reused_from"] == "memory"
    assert call.response["kv"]["restored_tokens"] == call.usage.cached_tokens


def test_the_output_after_a_restore_is_the_output_of_a_fresh_prefill(
        tmp_path: Path, store: SQLiteStore) -> None:
    """A restored state is the state that was kept, bit for bit. (A reply's tokens decoded one
    at a time leave KV values that differ in rounding from the same tokens prefilled in a
    batch, with or without snapshots; so the kept sequence here is a prefilled prompt, and the
    comparison is with a prefill of the whole next prompt.)"""
    from threadline.models.kv import KVCache

    folder = tmp_path / "kv"

    def model(max_tokens: int, kv: bool) -> LlamaCppModel:
        return LlamaCppModel(
            sampling=Sampling(temperature=0.0, max_tokens=max_tokens, seed=7),
            kv=(lambda identity: KVCache(identity, memory_bytes=0, folder=folder,
                                         disk_bytes=256 << 20)) if kv else None)

    first = model(1, kv=True)  # one token: the kept sequence is the prompt, prefilled
    engine = Engine(store, first, system=SYSTEM)
    a = engine.run_turn("List three ports in Norway.")
    first.close()
    restored = model(16, kv=True)
    follow = Engine(store, restored, system=SYSTEM).run_turn(
        "And one in Iceland?", conversation_id=a.conversation_id)
    assert follow.call.reused_from == "disk" and follow.call.usage.cached_tokens > 100
    shown = [i for i in store.history(a.conversation_id) if i.seq <= follow.message.seq]
    request = engine.assembler(a.conversation_id)(shown)  # what the restored call was sent
    replay = model(16, kv=False).complete(request)  # the same prompt, prefilled from nothing
    assert replay.reused_from == "none"
    assert replay.sent.tokens == store.call(follow.call.id).request.tokens  # type: ignore[union-attr]
    assert replay.extra["tokens"] == store.call(follow.call.id).response["tokens"]


def test_a_new_process_resumes_from_disk_and_a_bad_snapshot_never_fails_a_turn(
        tmp_path: Path, store: SQLiteStore) -> None:
    folder = tmp_path / "kv"
    first = _cached_model(folder)
    engine = Engine(store, first, system=SYSTEM)
    a = engine.run_turn("Where is parcel A-100?")
    first.close()  # its snapshot is on disk
    second = _cached_model(folder, memory=0)
    warm = Engine(store, second, system=SYSTEM).run_turn("Is it late?",
                                                         conversation_id=a.conversation_id)
    second.close()
    assert warm.call.reused_from == "disk"
    assert warm.call.usage.cached_tokens >= a.call.usage.prompt_tokens
    restore_ms = store.call(warm.call.id).response["restore_ms"]
    assert restore_ms is not None and restore_ms < warm.call.timings.ttft_ms  # type: ignore[operator]
    # damage every snapshot on disk: the next process prefills from scratch, and answers
    for path in folder.rglob("*.kv"):
        path.write_bytes(path.read_bytes()[:-100])
    cold = Engine(store, _cached_model(folder, memory=0), system=SYSTEM).run_turn(
        "Thanks.", conversation_id=a.conversation_id)
    assert cold.reply.text and cold.call.reused_from == "none"
    assert cold.call.usage.cached_tokens == 0


def test_a_snapshot_that_does_not_restore_is_dropped_for_a_fresh_prefill(
        store: SQLiteStore) -> None:
    from threadline.models.kv import Snapshot

    model = _cached_model(None)
    engine = Engine(store, model, system=SYSTEM)
    a = engine.run_turn("Where is parcel A-100?")
    assert model.kv is not None and model.kv.memory is not None
    [kept] = list(model.kv.memory.index.entries.values())
    good = model.kv.memory.get(kept.key)
    assert good is not None
    # the same tokens, a state that is not llama.cpp's: the restore is checked and refused
    model.kv.memory.keep(Snapshot(good.identity, good.tokens, b"\0" * 64))
    engine.run_turn("Something else entirely.")  # the context moves to another sequence
    again = engine.run_turn("Is it late?", conversation_id=a.conversation_id)
    call = store.call(again.call.id)
    assert call.response["kv"].get("restore_failed") is True
    assert call.reused_from == "none" and again.reply.text
