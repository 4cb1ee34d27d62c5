"""The OpenAI-compatible backend against a real serving engine running here: llama.cpp's own
server (llama-cpp-python) with the local SmolLM2 GGUF, two of them for affinity routing."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import require_llama_cpp
from threadline.engine import Engine
from threadline.errors import ModelUnavailable
from threadline.models.openai_compat import OpenAICompatibleModel, rendezvous
from threadline.render.openai import prompt_cache_key
from threadline.stores.sqlite import SQLiteStore


def test_rendezvous_routing_is_stable_and_moves_only_what_it_must() -> None:
    endpoints = [f"http://gpu-{n}:8000/v1" for n in range(4)]
    keys = [prompt_cache_key(f"c_{n}", "main") for n in range(400)]
    first = {key: rendezvous(key, endpoints)[0] for key in keys}
    assert first == {key: rendezvous(key, list(reversed(endpoints)))[0] for key in keys}
    assert all(60 <= list(first.values()).count(e) <= 140 for e in endpoints)  # spread
    fewer = {key: rendezvous(key, endpoints[:3])[0] for key in keys}
    moved = [key for key in keys if fewer[key] != first[key]]
    assert moved and all(first[key] == endpoints[3] for key in moved)  # only the lost ones


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two llama.cpp servers with the local model, as two serving machines would be."""
    require_llama_cpp()
    pytest.importorskip("sse_starlette", reason="install the local extra (llama.cpp server)")
    from threadline.models.llamacpp import default_model_path

    logs = tmp_path_factory.mktemp("llama-server")
    processes, urls = [], []
    try:
        for n in range(2):
            port = _free_port()
            with (logs / f"{n}.log").open("wb") as log:  # llama.cpp logs a lot to stderr
                processes.append(subprocess.Popen(
                    [sys.executable, "-m", "llama_cpp.server", "--model",
                     str(default_model_path()), "--model_alias", "smollm2", "--n_ctx", "2048",
                     "--n_threads", "1", "--host", "127.0.0.1", "--port", str(port)],
                    stdout=log, stderr=subprocess.STDOUT))
            urls.append(f"http://127.0.0.1:{port}/v1")
        for n, (url, process) in enumerate(zip(urls, processes, strict=True)):
            for _ in range(600):
                if process.poll() is not None:
                    raise RuntimeError(f"llama.cpp server exited: "
                                       f"{(logs / f'{n}.log').read_text()[-2000:]}")
                try:
                    if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            else:
                raise RuntimeError(f"llama.cpp server at {url} did not start")
        yield urls
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)


@pytest.mark.local_model
@pytest.mark.slow
def test_turns_through_a_real_server_are_recorded_as_sent(servers: list[str],
                                                          tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    model = OpenAICompatibleModel("smollm2", servers[:1], max_tokens=16, temperature=0.0)
    engine = Engine(store, model, system="You are terse.")
    first = engine.run_turn("Name a colour.")
    pieces: list[str] = []
    second = engine.run_turn("Another one?", conversation_id=first.conversation_id,
                             on_text=pieces.append)
    assert first.reply.text.strip() and "".join(pieces) == second.reply.text
    call = store.call(second.call.id)
    assert call.request is not None
    sent = call.request.params
    assert sent["prompt_cache_key"] == prompt_cache_key(first.conversation_id, "main")
    assert sent["stream"] is True and sent["model"] == "smollm2"
    assert [m["content"] for m in call.request.messages] == [
        "You are terse.", "Name a colour.", first.reply.text, "Another one?"]
    assert call.response["endpoint"] == servers[0] and call.timings.ttft_ms is not None
    # this server sends no usage on streams: recorded as unknown, not as a made-up count
    assert call.usage.prompt_tokens > 0 or call.response["usage"] == \
        "not reported by the server"
    store.close()


@pytest.mark.local_model
@pytest.mark.slow
def test_follow_ups_land_on_the_server_their_key_prefers_and_survive_a_dead_one(
        servers: list[str], tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    model = OpenAICompatibleModel("smollm2", [*servers, dead], max_tokens=4, temperature=0.0)
    engine = Engine(store, model)
    served: dict[str, set[str]] = {}
    for n in range(6):
        cid = engine.run_turn(f"Say {n}.").conversation_id
        engine.run_turn("Again.", conversation_id=cid)
        served[cid] = {store.call(c.id).response["endpoint"] for c in store.calls(cid)}
        preferred = [e for e in rendezvous(prompt_cache_key(cid, "main"), model.endpoints)
                     if e != dead][0]
        assert served[cid] == {preferred}  # every turn where its prefix is cached
    assert set().union(*served.values()) <= set(servers)
    only_dead = OpenAICompatibleModel("smollm2", [dead], max_tokens=4)
    with pytest.raises(ModelUnavailable, match="no endpoint answered"):
        Engine(store, only_dead).run_turn("anyone?")
    store.close()
