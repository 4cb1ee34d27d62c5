from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Invoke, snapshot

CHAT = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": "Book Lisbon, 3 May."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "search_flights", "arguments": "{\"to\": \"LIS\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "TP123 09:10"},
    {"role": "assistant", "content": [{"type": "text", "text": "TP123 at 09:10 works."}]},
]


def test_openai_messages_array_imports_one_conversation(tl: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT))
    run = tl("import", str(path), "--format", "openai-messages", "--json")
    assert run.code == 0, run.err
    (entry,) = run.json()["imported"]
    shown = tl("conversations", "show", entry["conversation_id"], "--json").json()
    assert shown["conversation"]["system"] == "You are a travel agent."
    assert [i["kind"] for i in shown["items"]] == [
        "user_message", "tool_call", "tool_result", "assistant_message"]
    assert shown["items"][1]["content"]["arguments"] == {"to": "LIS"}
    assert shown["conversation"]["metadata"]["imported"]["format"] == "openai-messages"
    # an imported conversation continues like a native one
    more = tl("chat", "--once", "Thanks!", "--conversation", entry["conversation_id"], "--json")
    assert more.code == 0 and more.json()["turn"] == 2


def test_malformed_lines_are_reported_and_skipped_whole(tl: Invoke, home: Path,
                                                        tmp_path: Path) -> None:
    good = {"messages": [{"role": "user", "content": "ok"},
                         {"role": "assistant", "content": "fine"}]}
    half_bad = [{"role": "user", "content": "first is fine"}, {"role": "robot", "content": "x"}]
    lines = [json.dumps(good).encode(), b"{not json", json.dumps(half_bad).encode(),
             b"\xff\xfe", b"", json.dumps([{"role": "user", "content": "   "}]).encode(),
             json.dumps([{"role": "user", "content": "last"}]).encode()]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(lines))
    run = tl("import", str(path), "--format", "openai-messages", "--json")
    assert run.code == 2
    report = run.json()
    assert [e["where"] for e in report["imported"]] == ["line 1", "line 7"]
    skipped = {s["where"]: s["error"] for s in report["skipped"]}
    assert set(skipped) == {"line 2", "line 3", "line 4", "line 6"}
    assert "not valid JSON" in skipped["line 2"]
    assert "message 2 has role 'robot'" in skipped["line 3"]
    assert "not valid UTF-8" in skipped["line 4"]
    assert "empty" in skipped["line 6"]
    titles = {c["title"] for c in tl("conversations", "list", "--json").json()}
    assert titles == {"ok", "last"}  # nothing of line 3's valid first message was kept

    before = snapshot(home)
    again = tl("import", str(path), "--format", "openai-messages")
    assert again.code == 2 and "0 conversations; 2 already imported; 4 skipped" in again.err
    assert snapshot(home) == before


def test_sharegpt_records(tl: Invoke, tmp_path: Path) -> None:
    records = [
        {"id": "abc_1", "conversations": [{"from": "human", "value": "Hi"},
                                          {"from": "gpt", "value": "Hello!"}]},
        {"id": "abc_2", "conversations": [{"from": "system", "value": "Be kind."},
                                          {"from": "human", "value": "Yo"}]},
        {"id": "abc_3", "conversations": [{"from": "alien", "value": "?"}]},
    ]
    path = tmp_path / "share.json"
    path.write_text(json.dumps(records))
    run = tl("import", str(path), "--format", "sharegpt")
    assert run.code == 2
    assert "record 1 (id abc_1), 2 items" in run.out
    assert "skipped record 3: message 1 is from 'alien'" in run.err


def test_bad_files_are_refused(tl: Invoke, home: Path, tmp_path: Path) -> None:
    missing = tl("import", str(tmp_path / "nope.jsonl"), "--format", "sharegpt")
    assert missing.code == 2 and "does not exist" in missing.err
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    run = tl("import", str(empty), "--format", "sharegpt")
    assert run.code == 2 and "the import file is empty" in run.err
    broken = tmp_path / "broken.json"
    broken.write_bytes(b"[{\"id\": 1,")
    run = tl("import", str(broken), "--format", "sharegpt")
    assert run.code == 2 and "not valid JSON" in run.err
    assert snapshot(home) == []


def test_import_from_stdin(tl: Invoke) -> None:
    run = tl("import", "-", "--format", "openai-messages", "--json",
             input=json.dumps([{"role": "user", "content": "piped"}]))
    assert run.code == 0 and len(run.json()["imported"]) == 1
