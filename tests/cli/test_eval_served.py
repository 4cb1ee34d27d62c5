"""``threadline eval run`` against a served model: llama.cpp's own server with the SmolLM2
GGUF, reached through the official ``openai`` and ``anthropic`` SDKs (the ``openai`` and
``anthropic`` backends), every turn recorded with its call, and re-scored without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from tests.conftest import ANTHROPIC_TEST_KEY
from threadline.models.llama_server import ALIAS, LlamaServer

TASKS = Path(__file__).parents[1] / "eval" / "data" / "sharded_tasks.json"
CONFIG = """[run]
tasks = "{tasks}"
kinds = ["math"]
k = 1
conditions = ["full", "sharded"]
[model]
backend = "{backend}"
reply_tokens = 24
[metrics]
bootstrap = 100
"""


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_a_run_against_a_served_model_records_every_turn_and_rescores_alike(
        llama_server: LlamaServer, tl: Invoke, home: Path, tmp_path: Path,
        backend: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG.format(tasks=TASKS, backend=backend))
    env = {"THREADLINE_OPENAI_BASE_URLS": f"{llama_server.url}/v1",
           "THREADLINE_OPENAI_MODEL": ALIAS, "OPENAI_API_KEY": ANTHROPIC_TEST_KEY,
           "THREADLINE_ANTHROPIC_MODEL": ALIAS,
           "THREADLINE_ANTHROPIC_BASE_URL": llama_server.url,
           "ANTHROPIC_API_KEY": ANTHROPIC_TEST_KEY}
    done = tl("eval", "run", str(config), "--id", backend, "--json", env=env)
    assert done.code == 0, done.err
    report = done.json()
    assert report["trials"] == 2
    errors = [t["error"] for t in map(json.loads, (home / "eval" / backend / "trials.jsonl")
                                      .read_text().splitlines()) if t.get("error")]
    assert report["errors"] == 0, errors
    run_dir = home / "eval" / backend
    trials = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    turns = [turn for trial in trials for turn in trial["turns"]]
    assert len(turns) > 2  # FULL is one turn; SHARDED one a shard until an answer or the end
    assert all(turn["call_id"] for turn in turns)  # every reply came from a recorded call
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["model"]["backend"] == backend
    rescored = tl("eval", "rescore", backend, "--json", env=env)
    assert rescored.code == 0, rescored.err
    assert rescored.json()["identical"] is True  # graded again from the log alone
