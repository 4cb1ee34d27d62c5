"""Every bad input: a clear message, a non-zero exit, and the store exactly as it was."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke, snapshot
from tests.conftest import require_llama_cpp


@pytest.fixture
def seeded(tl: Invoke, home: Path) -> str:
    conversation_id: str = tl("chat", "--once", "existing", "--json").json()["conversation_id"]
    return conversation_id


def _refused(run: object, code: int, words: str) -> None:
    assert run.code == code, (run.out, run.err)  # type: ignore[attr-defined]
    assert words in run.err  # type: ignore[attr-defined]
    assert "hint:" in run.err  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_messages(tl: Invoke, home: Path, seeded: str, text: str) -> None:
    before = snapshot(home)
    _refused(tl("chat", "--once", text), 2, "the message is empty")
    _refused(tl("chat", "--once", text, "--conversation", seeded), 2, "the message is empty")
    _refused(tl("chat", "--once", "-", input=text.encode()), 2, "the message is empty")
    assert snapshot(home) == before


def test_a_message_over_the_size_limit(tl: Invoke, home: Path, seeded: str) -> None:
    before = snapshot(home)
    run = tl("chat", "--once", "x" * 65, "--conversation", seeded,
             env={"THREADLINE_MAX_MESSAGE_BYTES": "64"})
    _refused(run, 2, "65 bytes, over the limit of 64 bytes")
    run = tl("chat", "--new", input=b"y" * 100 + b"\n", env={"THREADLINE_MAX_MESSAGE_BYTES": "64"})
    assert run.code == 2 and "over the limit" in run.err
    assert snapshot(home) == before


def test_a_bad_size_limit_setting(tl: Invoke) -> None:
    run = tl("chat", "--once", "x", env={"THREADLINE_MAX_MESSAGE_BYTES": "lots"})
    assert run.code == 2 and "must be a positive integer" in run.err


@pytest.mark.parametrize("name", ["THREADLINE_MONITOR", "THREADLINE_MONITOR_INTENT",
                                  "THREADLINE_METRICS", "THREADLINE_MEMORY_DENSE"])
def test_an_on_off_setting_that_is_neither_is_refused(tl: Invoke, home: Path,
                                                      name: str) -> None:
    run = tl("chat", "--once", "x", env={name: "maybe"})
    assert run.code == 2 and f"{name} must be 1 or 0" in run.err and "'maybe'" in run.err
    assert not (home / "threadline.db").exists()  # refused before the store was opened
    assert tl("chat", "--once", "x", env={name: "off"}).code == 0  # the usual words work


@pytest.mark.parametrize("name", ["THREADLINE_KV_MEMORY_MB", "THREADLINE_KV_DISK_MB"])
@pytest.mark.parametrize("value", ["-1", "lots", "1.5"])
def test_a_bad_kv_budget_setting(tl: Invoke, home: Path, name: str, value: str) -> None:
    run = tl("chat", "--once", "x", env={name: value})
    assert run.code == 2 and f"{name} must be a whole number of megabytes" in run.err
    assert not (home / "threadline.db").exists()  # refused before the store was opened


def test_invalid_utf8_on_stdin(tl: Invoke, home: Path, seeded: str) -> None:
    before = snapshot(home)
    _refused(tl("chat", "--once", "-", input=b"caf\xe9 au lait"), 2, "not valid UTF-8")
    run = tl("chat", "--conversation", seeded, input=b"fine line\xff\n")
    _refused(run, 2, "not valid UTF-8 (byte 0xff at offset 9)")
    assert snapshot(home) == before


def test_an_unknown_conversation_or_branch(tl: Invoke, home: Path, seeded: str) -> None:
    before = snapshot(home)
    _refused(tl("chat", "--once", "hi", "--conversation", "c_missing"), 3, "no conversation")
    _refused(tl("chat", "--conversation", "c_missing"), 3, "no conversation")
    _refused(tl("chat", "--once", "hi", "--conversation", seeded, "--branch", "nope"), 3,
             "has no branch 'nope'")
    _refused(tl("conversations", "show", "c_missing"), 3, "no conversation")
    _refused(tl("conversations", "delete", "c_missing", "--yes"), 3, "no conversation")
    _refused(tl("conversations", "fork", seeded, "--from", "99"), 3, "has no item 99")
    _refused(tl("calls", "show", "call_missing"), 3, "no model call")
    assert snapshot(home) == before


def test_a_data_file_that_is_not_a_threadline_database(tl: Invoke, home: Path) -> None:
    home.mkdir()
    db = home / "threadline.db"
    db.write_bytes(b"GIF89a not a database at all" * 50)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    _refused(tl("chat", "--once", "hi"), 4, "is not a threadline database")
    _refused(tl("conversations", "list"), 4, "not an SQLite file")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in home.iterdir()) == ["threadline.db"]


def test_a_database_from_a_newer_threadline(tl: Invoke, home: Path, seeded: str) -> None:
    conn = sqlite3.connect(home / "threadline.db")
    conn.execute("INSERT INTO threadline_migrations VALUES (999, 'future', 'x')")
    conn.commit()
    conn.close()
    before = snapshot(home)
    _refused(tl("chat", "--once", "hi", "--conversation", seeded), 4, "schema version 999")
    _refused(tl("conversations", "list"), 4, "newer than this threadline supports")
    assert snapshot(home) == before


def test_a_missing_model_file(tl: Invoke, home: Path, tmp_path: Path) -> None:
    run = tl("chat", "--once", "hi", "--model", "local",
             env={"THREADLINE_MODEL_PATH": str(tmp_path / "missing.gguf")})
    _refused(run, 6, "does not exist")
    assert not (home / "threadline.db").exists()


def test_an_unreadable_or_corrupt_model_file(tl: Invoke, home: Path, seeded: str,
                                             tmp_path: Path) -> None:
    before = snapshot(home)
    garbage = tmp_path / "model.gguf"
    garbage.write_bytes(b"\x00" * 4096)
    run = tl("chat", "--once", "hi", "--model", "local", "--conversation", seeded,
             env={"THREADLINE_MODEL_PATH": str(garbage)})
    _refused(run, 6, "is not a GGUF model")
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    require_llama_cpp()
    run = tl("chat", "--once", "hi", "--model", "local", "--conversation", seeded,
             env={"THREADLINE_MODEL_PATH": str(truncated)})
    _refused(run, 6, "could not load")
    unreadable = tmp_path / "directory.gguf"
    unreadable.mkdir()
    run = tl("chat", "--once", "hi", "--model", "local", "--conversation", seeded,
             env={"THREADLINE_MODEL_PATH": str(unreadable)})
    _refused(run, 6, "cannot be read")
    assert snapshot(home) == before


def _read_only_runner(directory: Path) -> list[str] | None:
    """A command prefix under which ``directory`` is read-only, even for root."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        return []
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run([unshare, "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        return None
    return [unshare, "-rm", "sh", "-c", f'mount --bind -o ro "{directory}" "{directory}" && '
            'exec "$0" "$@"']


def test_a_read_only_data_directory(tl: Invoke, home: Path, seeded: str) -> None:
    before = snapshot(home)
    prefix = _read_only_runner(home)
    if prefix is None:
        pytest.skip("no way to make a read-only directory here (not root-free, no unshare)")
    env = {**os.environ, "THREADLINE_HOME": str(home), "THREADLINE_MODEL": "scripted"}
    for args in (["chat", "--once", "hi", "--conversation", seeded], ["chat", "--once", "hi"]):
        run = subprocess.run([*prefix, sys.executable, "-m", "threadline", *args], env=env,
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 4, run.stderr
        assert "cannot write to" in run.stderr and "hint:" in run.stderr
    fresh = home / "sub"
    run = subprocess.run([*prefix, sys.executable, "-m", "threadline", "--home", str(fresh),
                          "chat", "--once", "hi"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 4 and "cannot write to" in run.stderr, run.stderr
    home.chmod(0o755)
    assert snapshot(home) == before


def test_unknown_targets_of_the_new_spellings(tl: Invoke, home: Path, seeded: str) -> None:
    before = snapshot(home)
    for args, code, words in [
            (("conversations", "context", "c_missing"), 3, "no conversation"),
            (("conversations", "compact", "c_missing"), 3, "no conversation"),
            (("conversations", "compact", seeded, "--branch", "nope"), 3, "no branch 'nope'"),
            (("conversations", "delete", "c_missing"), 3, "no conversation"),
            (("constraints", "delete", "c_missing", "1", "--yes"), 3, "no conversation"),
            (("constraints", "delete", seeded, "1", "--yes"), 2, "not an active constraint"),
            (("corpus", "ask", "nope", "cloud revenue?"), 3, "no corpus named 'nope'"),
            (("corpus", "delete", "nope", "--yes"), 3, "no corpus named 'nope'"),
            (("memory", "delete", "--user", "ann", "mem_missing", "--yes"), 3,
             "has no memory entry"),
            (("memory", "delete", "--yes"), 2, "say what to delete")]:
        _refused(tl(*args), code, words)
    assert snapshot(home) == before


def test_a_destructive_command_without_yes_on_a_pipe(tl: Invoke, home: Path,
                                                     seeded: str) -> None:
    before = snapshot(home)
    for args in [("conversations", "delete", seeded), ("memory", "delete", "--expired"),
                 ("memory", "delete", "--user", "ann", "--all")]:
        _refused(tl(*args, input="yes\n"), 2, "pass --yes to confirm")
    assert snapshot(home) == before
