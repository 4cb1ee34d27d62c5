"""The chaos benchmark, small: two replicas on PostgreSQL, one killed mid-run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TEST_DATABASE_URL

CHAOS = Path(__file__).resolve().parents[1] / "bench" / "chaos.py"


@pytest.mark.slow
def test_a_killed_replica_loses_forks_and_duplicates_nothing(postgres_url: str) -> None:
    # postgres_url: only for its check that the server is there (the run makes its own schema)
    run = subprocess.run([sys.executable, str(CHAOS), "--quick", "--json", "--database-url",
                          TEST_DATABASE_URL], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["killed"] is not None and report["acknowledged"] > 0
    assert (report["lost"], report["forked"], report["duplicates"],
            report["duplicated_answers"], report["duplicated_side_effects"]) == (0, 0, 0, 0, 0)
    assert 0 < report["side_effects_applied"] <= report["side_effect_attempts"]
    assert report["readable"] and report["unacknowledged"] == 0
    assert report["acknowledged"] == report["messages"] == report["stored_messages"]
