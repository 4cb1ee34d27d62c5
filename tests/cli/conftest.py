from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from threadline.cli import cli


@dataclass
class Run:
    result: Result

    @property
    def code(self) -> int:
        return self.result.exit_code

    @property
    def out(self) -> str:
        return self.result.stdout

    @property
    def err(self) -> str:
        return self.result.stderr

    def json(self) -> Any:
        return json.loads(self.result.stdout)


Invoke = Callable[..., Run]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def tl(home: Path) -> Invoke:
    """Run the CLI in-process with THREADLINE_HOME pointing at a fresh directory."""

    def invoke(*args: str, input: bytes | str | None = None,
               env: dict[str, str] | None = None) -> Run:
        runner = CliRunner()
        result = runner.invoke(cli, list(args), input=input, catch_exceptions=False,
                               env={"THREADLINE_HOME": str(home), "THREADLINE_MODEL": "scripted",
                                    **(env or {})})
        return Run(result)

    return invoke


def snapshot(home: Path) -> list[tuple[Any, ...]]:
    """Everything in the log, to compare before and after a refused command."""
    db = home / "threadline.db"
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        return [*conn.execute("SELECT * FROM conversations ORDER BY id"),
                *conn.execute("SELECT * FROM branches ORDER BY conversation_id, name"),
                *conn.execute("SELECT * FROM items ORDER BY conversation_id, seq"),
                *conn.execute("SELECT * FROM model_calls ORDER BY id")]
    finally:
        conn.close()
