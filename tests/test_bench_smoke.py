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
