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


def _jsonl(*values: object) -> str:
    return "\n".join(json.dumps(v) for v in values) + "\n"


def test_jsonl_of_message_arrays_objects_and_single_messages(tl: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(_jsonl(
        [{"role": "user", "content": "array"}, {"role": "assistant", "content": "one"}],
        {"messages": [{"role": "user", "content": "object"}]},
        {"role": "user", "content": "single", "conversation_id": "t-1"},
        {"role": "assistant", "content": "lines", "conversation_id": "t-1"}))
    run = tl("import", str(path), "--format", "openai-messages")
    assert run.code == 0, run.err
    assert "lines 3-4 (id t-1), 2 items" in run.out
    assert "imported 3 conversations; 0 already imported; 0 skipped" in run.err
    titles = {c["title"] for c in tl("conversations", "list", "--json").json()}
    assert titles == {"array", "object", "single"}


def test_an_empty_message_is_kept_and_the_report_says_so(tl: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "wild.jsonl"
    path.write_text(_jsonl([{"role": "user", "content": ""},
                            {"role": "assistant", "content": "Hello! How can I help?"},
                            {"role": "user", "content": "A haiku, please."},
                            {"role": "assistant", "content": "Old pond..."}]))
    run = tl("import", str(path), "--format", "openai-messages")
    assert run.code == 0, run.err
    assert "line 1, 4 items (kept 1 empty message)" in run.out
    assert "kept 1 empty message: recorded with no text; an empty user message is never sent " \
           "to a model" in run.err
    again = tl("import", str(path), "--format", "openai-messages", "--json")
    assert again.code == 0 and again.json()["empty_messages"] == 0  # nothing new was imported
    (entry,) = again.json()["already_imported"]
    shown = tl("conversations", "show", entry["conversation_id"], "--json").json()
    assert [i["content"]["text"] for i in shown["items"]][:2] == ["", "Hello! How can I help?"]
    more = tl("chat", "--once", "Another?", "--conversation", entry["conversation_id"], "--json")
    assert more.code == 0 and more.json()["turn"] == 3


def test_json_report_counts_empty_messages(tl: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "share.jsonl"
    path.write_text(_jsonl({"id": "w1", "conversations": [{"from": "human", "value": " "},
                                                          {"from": "gpt", "value": "Hi!"},
                                                          {"from": "human", "value": "Bye"},
                                                          {"from": "gpt", "value": ""}]}))
    report = tl("import", str(path), "--format", "sharegpt", "--json").json()
    assert report["empty_messages"] == 2
    assert [(e["source_id"], e["items"], e["empty_messages"]) for e in report["imported"]] == [
        ("w1", 4, 2)]


def test_bad_input_names_its_line_and_changes_nothing(tl: Invoke, home: Path,
                                                      tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"role": "user", "content": "kept"}]))
    assert tl("import", str(good), "--format", "openai-messages").code == 0
    before = snapshot(home)

    broken = tmp_path / "broken.json"  # a pretty-printed document with a missing comma
    broken.write_text('[\n  {"role": "user", "content": "a"}\n  {"role": "user"}\n]\n')
    run = tl("import", str(broken), "--format", "openai-messages")
    assert run.code == 2
    assert "the file is not valid JSON: Expecting ',' delimiter at line 3, column 3; nothing " \
           "was imported" in run.err
    assert snapshot(home) == before

    spoilt = tmp_path / "spoilt.jsonl"  # one conversation over three lines, one unreadable
    spoilt.write_text(_jsonl({"role": "user", "content": "a"}) + "{\"role\": \"assistant\",\n"
                      + _jsonl({"role": "user", "content": "c"}))
    run = tl("import", str(spoilt), "--format", "openai-messages", "--json")
    assert run.code == 2
    (skipped,) = run.json()["skipped"]
    assert skipped["where"] == "lines 1-3" and skipped["error"].startswith("line 2: not valid JSON")
    assert run.json()["imported"] == []
    assert snapshot(home) == before
