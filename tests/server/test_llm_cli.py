"""A real stateless client end to end: simonw's ``llm`` CLI with threadline registered as an
OpenAI-compatible model, against ``threadline serve`` running the local model. ``llm -c``
continues a conversation by resending all of it; threadline keeps one durable conversation
with every turn, and each request reuses the previous one's prefix."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import require_llama_cpp
from threadline.items import ItemKind
from threadline.stores.sqlite import SQLiteStore

require_llama_cpp()

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

LLM = Path(sys.executable).with_name("llm")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port, home = _free_port(), tmp_path / "home"
    env = {**os.environ, "THREADLINE_HOME": str(home), "THREADLINE_MODEL": "local"}
    process = subprocess.Popen([sys.executable, "-m", "threadline", "serve", "--port",
                                str(port)], env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise AssertionError("threadline serve did not start")
        yield f"{base}/v1", home
    finally:
        process.terminate()
        process.wait(timeout=20)


def _llm(user_dir: Path, *args: str) -> str:
    env = {**os.environ, "LLM_USER_PATH": str(user_dir)}
    done = subprocess.run([str(LLM), *args], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_llm_c_ends_in_one_conversation_with_prefix_reuse(server: tuple[str, Path],
                                                         tmp_path: Path) -> None:
    if not LLM.exists() and shutil.which("llm") is None:
        pytest.fail("the llm CLI is not installed: scripts/bootstrap installs it (dev extra)")
    base, home = server
    user_dir = tmp_path / "llm"
    user_dir.mkdir()
    (user_dir / "extra-openai-models.yaml").write_text(
        f"- model_id: threadline\n  model_name: threadline\n  api_base: \"{base}\"\n")
    _llm(user_dir, "-m", "threadline", "My name is Ana.")
    _llm(user_dir, "-c", "What is my name?")
    _llm(user_dir, "-c", "Say it again.")
    store = SQLiteStore(home / "threadline.db")
    try:
        (summary,) = store.conversations()
        cid = summary.conversation.id
        assert [b.name for b in store.branches(cid)] == ["main"]
        said = [i.text for i in store.history(cid) if i.kind is ItemKind.USER]
        assert said == ["My name is Ana.", "What is my name?", "Say it again."]
        calls = store.calls(cid)
        assert [c.turn for c in calls] == [1, 2, 3]
        for earlier, later in zip(calls, calls[1:], strict=False):
            assert later.usage.cached_tokens >= earlier.usage.prompt_tokens  # reused
            assert later.reused_from != "none"
    finally:
        store.close()
