"""``threadline audit export|verify`` from the command line, and every bad input: a clear
message, a non-zero exit, the store as it was, and nothing written that a resume would trust."""

from __future__ import annotations

import importlib
import json
import socket
from importlib.util import find_spec
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke, snapshot

pytest.importorskip("pyarrow", reason="install the audit extra")


@pytest.fixture
def seeded(tl: Invoke, home: Path) -> str:
    cid: str = tl("chat", "--once", "Where is the hotel?", "--json").json()["conversation_id"]
    tl("chat", "--once", "And the station?", "--conversation", cid)
    return cid


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()} if root.exists() else {}


def _refused(run: object, words: str, code: int = 2) -> None:
    assert run.code == code, (run.out, run.err)  # type: ignore[attr-defined]
    assert words in run.err, run.err  # type: ignore[attr-defined]
    assert "hint:" in run.err  # type: ignore[attr-defined]


def test_export_then_verify(tl: Invoke, seeded: str, tmp_path: Path) -> None:
    out = tmp_path / "audit"
    shown = tl("audit", "export", "--out", str(out), "--json").json()
    assert shown["rows"]["turns"] == 2 and shown["rows"]["calls"] == 2
    assert shown["files_written"] == 3  # turns, calls, requests: no compactions or memory
    again = tl("audit", "export", "--out", str(out), "--json").json()
    assert again["files_written"] == 0 and again["files_unchanged"] == 3
    ok = tl("audit", "verify", str(out), "--json")
    assert ok.code == 0 and ok.json()["ok"] and ok.json()["conversations_checked"] == 1
    human = tl("audit", "verify", str(out))
    assert human.code == 0 and "match the manifest" in human.out


def test_verify_names_the_changed_file(tl: Invoke, seeded: str, tmp_path: Path) -> None:
    out = tmp_path / "audit"
    tl("audit", "export", "--out", str(out))
    bad = sorted((out / "calls").rglob("*.parquet"))[0]
    bad.write_bytes(bad.read_bytes()[:-9] + b"012345678")
    run = tl("audit", "verify", str(out))
    assert run.code == 1
    name = str(bad.relative_to(out))
    assert name in run.out and "sha256 differs" in run.out and name in run.err


@pytest.mark.parametrize("missing", [["msgspec"], ["pyarrow", "msgspec"]])
def test_without_the_audit_extra(tl: Invoke, home: Path, seeded: str, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch, missing: list[str]) -> None:
    module = importlib.import_module("threadline.cli.audit")  # the package names its group so
    monkeypatch.setattr(module, "find_spec",
                        lambda name: None if name in missing else find_spec(name))
    before = snapshot(home)
    for command in (("export", "--out", str(tmp_path / "a")), ("verify", str(tmp_path))):
        _refused(tl("audit", *command), f"the audit trail needs the audit extra "
                 f"({', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing)")
    assert not (tmp_path / "a").exists() and snapshot(home) == before


@pytest.mark.parametrize("value", ["2026-13-01", "yesterday", "2026-3-1", "2026-03-01T00:00"])
def test_a_bad_date(tl: Invoke, home: Path, seeded: str, tmp_path: Path, value: str) -> None:
    before = snapshot(home)
    for option in ("--since", "--until"):
        _refused(tl("audit", "export", "--out", str(tmp_path / "a"), option, value),
                 f"{option} {value!r} is not a date")
    assert not (tmp_path / "a").exists() and snapshot(home) == before


def test_since_after_until(tl: Invoke, home: Path, seeded: str, tmp_path: Path) -> None:
    before = snapshot(home)
    _refused(tl("audit", "export", "--out", str(tmp_path / "a"), "--since", "2026-03-02",
                "--until", "2026-03-01"), "--since 2026-03-02 is after --until 2026-03-01")
    assert not (tmp_path / "a").exists() and snapshot(home) == before


@pytest.mark.parametrize("out", ["gs://bucket/audit", "ftp://host/audit", "s3:///audit"])
def test_an_unknown_or_incomplete_url(tl: Invoke, home: Path, seeded: str, out: str) -> None:
    before = snapshot(home)
    _refused(tl("audit", "export", "--out", out), "--out")
    _refused(tl("audit", "verify", out), "--out")
    assert snapshot(home) == before


def test_an_unreachable_endpoint(tl: Invoke, home: Path, seeded: str) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before = snapshot(home)
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_REGION": "us-east-1"}
    run = tl("audit", "export", "--out", "s3://audit/x", "--endpoint-url",
             f"http://127.0.0.1:{port}", env=env)
    _refused(run, "could not reach s3://audit/x")
    _refused(tl("audit", "export", "--out", "s3://audit/x", "--endpoint-url", "ftp://h",
                env=env), "is not an http(s) URL")
    assert snapshot(home) == before


def test_a_foreign_manifest_or_directory(tl: Invoke, home: Path, seeded: str,
                                         tmp_path: Path) -> None:
    before = snapshot(home)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "manifest.json").write_text('{"tables": ["x"]}')
    _refused(tl("audit", "export", "--out", str(foreign)), "not a threadline audit manifest")
    (foreign / "manifest.json").write_text("not json")
    _refused(tl("audit", "export", "--out", str(foreign)), "not JSON")
    _refused(tl("audit", "verify", str(foreign)), "not a threadline audit manifest")
    assert _tree(foreign) == {"manifest.json": b"not json"}
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    _refused(tl("audit", "export", "--out", str(busy)), "holds no manifest.json")
    _refused(tl("audit", "verify", str(busy)), "holds no manifest.json")
    assert _tree(busy) == {"notes.txt": b"mine"}
    a_file = tmp_path / "file"
    a_file.write_text("x")
    _refused(tl("audit", "export", "--out", str(a_file)), "is a file, not a directory")
    assert snapshot(home) == before


def test_an_export_made_otherwise_is_not_continued(tl: Invoke, home: Path, seeded: str,
                                                   tmp_path: Path) -> None:
    out = tmp_path / "audit"
    tl("audit", "export", "--out", str(out))
    kept = _tree(out)
    _refused(tl("audit", "export", "--out", str(out), "--no-content"),
             "holds an export made with other options (content=True)")
    _refused(tl("audit", "export", "--out", str(out), "--profile", "openai"),
             "other options (profile='anthropic-5m')")
    other = tmp_path / "other-home"
    _refused(tl("--home", str(other), "audit", "export", "--out", str(out)),
             "holds an export of")
    manifest = json.loads(kept["manifest.json"])
    assert manifest["options"]["content"] is True and _tree(out) == kept


def test_an_unknown_profile(tl: Invoke, seeded: str, tmp_path: Path) -> None:
    run = tl("audit", "export", "--out", str(tmp_path / "a"), "--profile", "nope")
    assert run.code == 2 and "unknown cache profile 'nope'" in run.err
    assert not (tmp_path / "a").exists()
