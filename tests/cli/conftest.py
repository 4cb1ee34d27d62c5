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


# what a refused command must leave as it was: the log, the corpora, the memory, the tokens
_KEPT = {"conversations": "id", "branches": "conversation_id, name",
         "items": "conversation_id, seq", "model_calls": "id", "corpora": "name",
         "corpus_documents": "corpus, doc_id", "corpus_chunks": "id",
         "memory_entries": "user_id, id", "memory_jobs": "conversation_id, seq",
         "api_tokens": "id"}


def snapshot(home: Path) -> list[tuple[Any, ...]]:
    """Everything in the log, the corpora, the memory and the tokens, to compare before and
    after a refused command."""
    db = home / "threadline.db"
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        return [(table, *row) for table, order in _KEPT.items() if table in tables
                for row in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]
    finally:
        conn.close()
