"""The benchmark scripts still run (tiny sizes; they measure nothing here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_llama_cpp, require_llama_server

BENCH = Path(__file__).resolve().parents[1] / "bench"
QUICK = {"append.py": [], "history_growth.py": ["--no-langgraph", "--whole-turn"],
         "replay_reuse.py": [],
         "ttft_local.py": [], "compaction_retention.py": [], "tool_clearing.py": [],
         "compaction_ttft.py": [], "load.py": ["--stores", "sqlite"], "kv_interleaved.py": [],
         "kv_process.py": [], "kv_sharing.py": [], "stateless.py": [],
         "anthropic_turns.py": [], "telemetry_overhead.py": [], "audit_export.py": [],
         "inspector.py": [], "inspector_call.py": [], "eval_overhead.py": [],
         "provenance.py": [], "reminder_reuse.py": [], "delegation.py": [],
         "monitor_cost.py": [], "safety_files.py": []}
LOCAL_MODEL = {"ttft_local.py", "compaction_ttft.py", "kv_interleaved.py", "kv_process.py",
               "kv_sharing.py"}
LLAMA_SERVER = {"anthropic_turns.py"}  # starts its own llama-server


@pytest.mark.parametrize("script", sorted(QUICK))
def test_benchmark_runs_in_quick_mode(script: str) -> None:
    if script in LOCAL_MODEL:
        require_llama_cpp()
    if script in LLAMA_SERVER:
        require_llama_server()
    run = subprocess.run([sys.executable, str(BENCH / script), "--quick", "--json",
                          *QUICK[script]], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["benchmark"] == script.removesuffix(".py")


def test_safety_files_refuses_a_file_that_is_not_there(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(BENCH / "safety_files.py"),
                          str(tmp_path / "blind99.toml")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and "no such script file" in run.stderr


def test_rewrite_chat_counts_blinds_and_scores(tmp_path: Path) -> None:
    from threadline.eval.constraint_corpus import SHAREGPT

    data = tmp_path / "data"
    (data / SHAREGPT).parent.mkdir(parents=True)
    turns = [("human", "What is throat cancer?"), ("gpt", "A cancer of the throat."),
             ("human", "Is it treatable?"), ("gpt", "Often."), ("human", "continue")]
    (data / SHAREGPT).write_text("\n".join(json.dumps(
        {"id": f"c{n}_0", "conversations": [{"from": f, "value": v} for f, v in turns]})
        for n in range(8)) + "\n")
    script = str(BENCH / "rewrite_chat.py")
    found = {}
    for split in ("dev", "test"):
        run = subprocess.run([sys.executable, script, "--data", str(data), "--split", split,
                              "--json", "--dump", str(tmp_path / f"{split}.json")],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        found[split] = json.loads(run.stdout)
    assert found["dev"]["follow_ups"] + found["test"]["follow_ups"] == 16
    assert found["dev"]["benchmark"] == "rewrite_chat" and found["dev"]["follow_ups"] > 0
    # "Is it treatable?" is rewritten, "continue" is not
    assert found["dev"]["changed"] * 2 == found["dev"]["follow_ups"]
    # the same dump against itself: nothing differs, nothing to judge
    dump = str(tmp_path / "dev.json")
    run = subprocess.run([sys.executable, script, "--blind", dump, dump, "--out",
                          str(tmp_path / "blind")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and json.loads((tmp_path / "blind" / "items.json").read_text()) == []
    run = subprocess.run([sys.executable, script, "--blind", dump,
                          str(tmp_path / "test.json"), "--out", str(tmp_path / "b2")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "different follow-ups" in run.stderr
    run = subprocess.run([sys.executable, script, "--blind", dump, dump], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2 and "--blind needs --out" in run.stderr
    (tmp_path / "key.json").write_text(json.dumps([{"item": 1, "A": "after"},
                                                   {"item": 2, "A": "before"}]))
    (tmp_path / "labels.json").write_text(json.dumps([
        {"item": 1, "better": "A", "A_bad": False, "B_bad": True},
        {"item": 2, "better": "B", "A_bad": True, "B_bad": False}]))
    run = subprocess.run([sys.executable, script, "--score", str(tmp_path / "key.json"),
                          str(tmp_path / "labels.json")], capture_output=True, text=True,
                         timeout=120)
    assert json.loads(run.stdout) == {"items": 2, "preferred": {"after": 2},
                                      "bad": {"after": 0, "before": 2}}
    run = subprocess.run([sys.executable, script, "--data", str(tmp_path / "none")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "no ShareGPT sample" in run.stderr


def test_monitor_real_counts_flags_on_conversations(tmp_path: Path) -> None:
    from threadline.eval.constraint_corpus import SHAREGPT

    data = tmp_path / "data"
    (data / SHAREGPT).parent.mkdir(parents=True)
    turns = [("human", "Write a haiku about autumn"), ("gpt", "Leaves fall slowly down."),
             ("human", "make it sadder")]
    (data / SHAREGPT).write_text("\n".join(json.dumps(
        {"id": f"c{n}_0", "conversations": [{"from": f, "value": v} for f, v in turns]})
        for n in range(6)) + "\n")
    script = str(BENCH / "monitor_real.py")
    total = 0
    for split in ("dev", "test"):
        run = subprocess.run([sys.executable, script, "--data", str(data), "--split", split,
                              "--no-embeddings", "--json", "--flagged"],
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        found = json.loads(run.stdout)
        assert found["benchmark"] == "monitor_real" and found["detectors"] == ["rules"]
        assert found["turns"] == 2 * found["conversations"] and found["flagged_ids"] == []
        total += found["conversations"]
    assert total == 6
    for bad, message in ((["--data", str(tmp_path / "none")], "no ShareGPT sample"),
                         (["--data", str(data), "--reach", "2"], "a cosine in [0, 1]")):
        run = subprocess.run([sys.executable, script, *bad], capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 2 and message in run.stderr
