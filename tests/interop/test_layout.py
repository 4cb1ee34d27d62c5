"""Every layout an import file may have is read, and every unreadable part is named by line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from threadline.errors import ImportFormatError
from threadline.interop.importers import BadRecord, ImportRecord, read_records
from threadline.items import ItemKind


def _read(data: bytes | str, fmt: str = "openai-messages") -> list[ImportRecord | BadRecord]:
    raw = data.encode() if isinstance(data, str) else data
    return list(read_records(raw, fmt, max_message_bytes=10_000))


def _jsonl(*values: Any) -> str:
    return "\n".join(json.dumps(v) for v in values) + "\n"


def _texts(record: ImportRecord | BadRecord) -> list[str]:
    assert isinstance(record, ImportRecord), record
    return [str(item.content.get("text", item.kind)) for item in record.items]


def _user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def _assistant(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **extra}


def test_jsonl_whose_lines_are_message_arrays() -> None:
    # the file issue 15 saw refused as "starts like a JSON array but is not valid JSON"
    records = _read(_jsonl([_user("a"), _assistant("b")], [_user("c")], [_user("d")]))
    assert [r.where for r in records] == ["line 1", "line 2", "line 3"]
    assert [_texts(r) for r in records] == [["a", "b"], ["c"], ["d"]]


def test_jsonl_of_messages_objects_and_single_messages_mixed() -> None:
    records = _read(_jsonl({"messages": [_user("a"), _assistant("b")], "id": "x"},
                           _user("c"), _assistant("d"), _user("e"),
                           [_user("f")],
                           {"role": "system", "content": "Be brief."}, _user("g")))
    assert [r.where for r in records] == ["line 1", "lines 2-4", "line 5", "lines 6-7"]
    assert [_texts(r) for r in records] == [["a", "b"], ["c", "d", "e"], ["f"], ["g"]]
    last = records[-1]
    assert isinstance(last, ImportRecord) and last.system == "Be brief."


def test_single_message_lines_split_where_conversation_id_changes() -> None:
    records = _read(_jsonl(_user("a", conversation_id="one"),
                           _assistant("b", conversation_id="one"),
                           _user("c", conversation_id="two"), _user("d")))
    assert [r.where for r in records] == ["lines 1-2", "line 3", "line 4"]
    assert [r.source_id for r in records if isinstance(r, ImportRecord)] == ["one", "two", None]


def test_json_documents() -> None:
    messages = [_user("a"), _assistant("b")]
    one = _read(json.dumps(messages, indent=2))  # pretty-printed: one conversation
    assert [(r.where, _texts(r)) for r in one] == [("record 1", ["a", "b"])]
    wrapped = _read(json.dumps({"messages": messages}, indent=2))
    assert [(r.where, _texts(r)) for r in wrapped] == [("record 1", ["a", "b"])]
    many = _read(json.dumps([messages, {"messages": [_user("c")]}], indent=1))
    assert [(r.where, _texts(r)) for r in many] == [("record 1", ["a", "b"]),
                                                    ("record 2", ["c"])]
    single = _read(json.dumps(_user("alone", conversation_id=7), indent=2))
    assert [(r.source_id, _texts(r)) for r in single] == [("7", ["alone"])]
    one_line = _read(json.dumps(messages))  # a one-line file is one line of JSON Lines too
    assert [r.where for r in one_line] == ["line 1"]
    sharegpt = _read(json.dumps({"id": "s1", "conversations": [{"from": "human", "value": "hi"}]},
                                indent=2), "sharegpt")
    assert [(r.where, r.source_id, _texts(r)) for r in sharegpt] == [("record 1", "s1", ["hi"])]


def test_a_byte_order_mark_is_not_content() -> None:
    records = _read(b"\xef\xbb\xbf" + _jsonl([_user("a")], [_user("b")]).encode())
    assert [_texts(r) for r in records] == [["a"], ["b"]]


@pytest.mark.parametrize(("data", "expected"), [
    ('[\n  {"role": "user", "content": "a"},\n  {"role": "user" "content": "b"}\n]',
     "not valid JSON: Expecting ',' delimiter at line 3, column 19; nothing was imported"),
    ('[{"id": 1,', "not valid JSON"),
    ("[]", "empty JSON array"),
    ("42", "holds a JSON int, not conversations"),
    ('[{"role": "user", "content": "caf\xe9"}]'.encode("latin-1"),
     "not valid UTF-8 (byte offset 33, line 1)"),
    ("\n \n", "the import file is empty"),
])
def test_a_file_that_is_not_an_import_is_refused_whole(data: bytes | str, expected: str) -> None:
    with pytest.raises(ImportFormatError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        _read(data)


def test_an_unreadable_line_among_single_messages_skips_their_conversation_whole() -> None:
    lines = [json.dumps([_user("whole")]), json.dumps(_user("a")), "{broken",
             json.dumps(_assistant("b")), json.dumps(_user("c")), json.dumps([_user("after")])]
    records = _read("\n".join(lines))
    assert [r.where for r in records] == ["line 1", "lines 2-5", "line 6"]
    bad = records[1]
    assert isinstance(bad, BadRecord)
    assert bad.error.startswith("line 3: not valid JSON")
    assert "one conversation, so none of it was imported" in bad.error


def test_an_unreadable_line_just_before_single_messages_goes_with_them() -> None:
    lines = [json.dumps([_user("whole")]), "\xff", json.dumps(_user("a", conversation_id="k"))]
    records = _read("\n".join(lines).encode("latin-1"))
    assert [r.where for r in records] == ["line 1", "lines 2-3"]
    assert isinstance(records[1], BadRecord) and "line 2: not valid UTF-8" in records[1].error


def test_unreadable_lines_between_whole_conversations_are_reported_alone() -> None:
    # JSON Lines whose first line is broken: that line is reported, the rest imported
    records = _read("{nope\n" + _jsonl([_user("a")]) + "[oops\n" + _jsonl([_user("b")]))
    assert [(r.where, isinstance(r, BadRecord)) for r in records] == [
        ("line 1", True), ("line 2", False), ("line 3", True), ("line 4", False)]


def test_a_bad_message_on_its_own_line_is_named_by_that_line() -> None:
    records = _read(_jsonl(_user("a"), _assistant("b"), {"role": "robot", "content": "x"}))
    assert [(r.where, getattr(r, "error", None)) for r in records] == [
        ("lines 1-3", "line 3 has role 'robot'; expected system, developer, user, assistant "
                      "or tool")]
    late_system = _read(_jsonl(_user("a"), {"role": "system", "content": "s"}))
    assert isinstance(late_system[0], BadRecord)
    assert late_system[0].error.startswith("line 2 is a system message after the conversation")


def test_empty_messages_are_kept_not_the_conversation_dropped() -> None:
    transcript = [_user(""), _assistant("Hello! How can I help?"), _user("Write a haiku."),
                  _assistant("Spring rain ..."), _user("  \n"), _assistant("")]
    (record,) = _read(json.dumps(transcript))
    assert isinstance(record, ImportRecord)
    assert [(i.kind, i.content["text"]) for i in record.items] == [
        (ItemKind.USER, ""), (ItemKind.ASSISTANT, "Hello! How can I help?"),
        (ItemKind.USER, "Write a haiku."), (ItemKind.ASSISTANT, "Spring rain ..."),
        (ItemKind.USER, "  \n"), (ItemKind.ASSISTANT, "")]
    assert record.empty == 3
    assert record.items[0].client_msg_id == record.key  # the import key rides on the first item
    (share,) = _read(_jsonl({"id": "w", "conversations": [
        {"from": "human", "value": ""}, {"from": "gpt", "value": "Hi"}]}), "sharegpt")
    assert isinstance(share, ImportRecord) and share.empty == 1


def test_a_record_of_nothing_but_empty_messages_is_skipped() -> None:
    (record,) = _read(json.dumps([_user(" "), _assistant("")]))
    assert isinstance(record, BadRecord)
    assert record.error == "every message of the record is empty: there is nothing to import"


def test_an_oversized_message_is_still_refused_by_its_line() -> None:
    (record,) = _read(_jsonl(_user("a"), _assistant("x" * 20_000)))
    assert isinstance(record, BadRecord) and record.error.startswith("line 2 (assistant): the "
                                                                     "message is 20,000 bytes")


def test_a_document_broken_by_a_byte_outside_its_strings_is_reported_as_not_utf8() -> None:
    with pytest.raises(ImportFormatError, match=r"not valid UTF-8 \(byte offset 10, line 2\)"):
        _read(b'[\n  {"a": \xff}\n]')
