"""The benchmark scripts still run (tiny sizes; they measure nothing here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.parametrize("script", ["append.py", "history_growth.py"])
def test_benchmark_runs_in_quick_mode(script: str) -> None:
    run = subprocess.run([sys.executable, str(BENCH / script), "--quick", "--json",
                          *(["--no-langgraph"] if script == "history_growth.py" else [])],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["benchmark"] == script.removesuffix(".py")
