"""Reading other systems' transcripts into threadline conversations.

Formats:

``openai-messages``
    A JSON array of ``{role, content}`` messages (one conversation), or JSONL with one
    conversation per line: an array of messages, or an object with a ``messages`` array (the
    OpenAI fine-tuning layout).
``sharegpt``
    JSONL (or a JSON array) of records ``{"id": …, "conversations": [{"from", "value"}]}``.

A record becomes one conversation, imported whole in one transaction or not at all. A record
that cannot be read is reported with its line (or position) and skipped; the rest go on.
Each record carries an import key (a hash of its content), so importing a file twice does not
duplicate what is already there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from threadline.errors import ClientMessageConflict, ImportFormatError, InputError
from threadline.items import NewItem, canonical_json, new_id, utc_now, validate_text
from threadline.stores.base import Commit, NewConversation, Store

FORMATS = ("openai-messages", "sharegpt")
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant",
                   "bard": "assistant", "bing": "assistant", "assistant": "assistant",
                   "model": "assistant", "system": "system"}


@dataclass(frozen=True)
class ImportRecord:
    where: str  # "line 17", or "record 3" in a JSON array
    key: str    # identifies the record's content; stored as its first item's client id
    items: list[NewItem]
    system: str | None = None
    source_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BadRecord:
    where: str
    error: str

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "error": self.error}


def read_records(data: bytes, fmt: str, *,
                 max_message_bytes: int) -> Iterator[ImportRecord | BadRecord]:
    """Parse ``data`` in ``fmt``, yielding a record or a reason to skip it, one per entry."""
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown import format {fmt!r}; choose one of: "
                                f"{', '.join(FORMATS)}")
    if not data.strip():
        raise ImportFormatError("the import file is empty", hint="check the path")
    for where, raw in _entries(data, fmt):
        if isinstance(raw, BadRecord):
            yield raw
            continue
        try:
            yield _record(where, raw, fmt, max_message_bytes)
        except InputError as err:
            yield BadRecord(where, err.message)


def _entries(data: bytes, fmt: str) -> Iterator[tuple[str, Any]]:
    if data.lstrip()[:1] == b"[":
        try:
            whole = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise ImportFormatError(f"the file starts like a JSON array but is not valid JSON "
                                    f"in UTF-8 ({err})") from err
        if fmt == "openai-messages":
            yield "record 1", whole
        else:
            for index, entry in enumerate(whole, start=1):
                yield f"record {index}", entry
        return
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            yield where, json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as err:
            yield where, BadRecord(where, f"not valid UTF-8 (byte offset {err.start})")
        except ValueError as err:
            yield where, BadRecord(where, f"not valid JSON ({err})")


def _record(where: str, raw: Any, fmt: str, max_bytes: int) -> ImportRecord:
    key = "import:" + hashlib.blake2b(canonical_json([fmt, raw]).encode("utf-8"),
                                      digest_size=16).hexdigest()
    source_id = None
    if fmt == "sharegpt":
        if not isinstance(raw, dict) or not isinstance(raw.get("conversations"), list):
            raise InputError("expected an object with a 'conversations' array")
        source_id = raw.get("id") if isinstance(raw.get("id"), str) else None
        messages = [_sharegpt_message(i, m) for i, m in enumerate(raw["conversations"], 1)]
    else:
        if isinstance(raw, dict) and isinstance(raw.get("messages"), list):
            raw = raw["messages"]
        if not isinstance(raw, list):
            raise InputError("expected an array of messages, or an object with 'messages'")
        messages = [_openai_message(i, m) for i, m in enumerate(raw, 1)]
    system_parts: list[str] = []
    items: list[NewItem] = []
    for index, (role, message) in enumerate(messages, 1):
        if role == "system":
            if items:
                raise InputError(f"message {index} is a system message after the conversation "
                                 "started; only leading system messages are supported")
            system_parts.append(message)
            continue
        items.extend(_items(index, role, message, max_bytes))
    if not items:
        raise InputError("the record has no user or assistant messages")
    first = items[0]
    items[0] = NewItem(first.kind, first.content, client_msg_id=key)
    return ImportRecord(where=where, key=key, items=items,
                        system="\n\n".join(system_parts) or None, source_id=source_id)


def _sharegpt_message(index: int, message: Any) -> tuple[str, Any]:
    if not isinstance(message, dict) or not isinstance(message.get("value"), str):
        raise InputError(f"message {index} needs a string 'value'")
    role = _SHAREGPT_ROLES.get(str(message.get("from", "")).lower())
    if role is None:
        raise InputError(f"message {index} is from {message.get('from')!r}; expected one of: "
                         f"{', '.join(sorted(_SHAREGPT_ROLES))}")
    return role, message["value"]


def _openai_message(index: int, message: Any) -> tuple[str, Any]:
    if not isinstance(message, dict):
        raise InputError(f"message {index} is not an object")
    role = message.get("role")
    if role == "developer":
        role = "system"
    if role not in ("system", "user", "assistant", "tool"):
        raise InputError(f"message {index} has role {role!r}; expected system, developer, "
                         "user, assistant or tool")
    content = message.get("content")
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in ("text", "input_text",
                                                                       "output_text"):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise InputError(f"message {index} has a {kind!r} content part; only text "
                                 "parts can be imported")
            texts.append(str(part.get("text", "")))
        content = "".join(texts)
    if content is not None and not isinstance(content, str):
        raise InputError(f"message {index} has content of type {type(content).__name__}")
    if role in ("system", "user"):
        return role, content or ""
    return role, {**message, "content": content or ""}


def _items(index: int, role: str, message: Any, max_bytes: int) -> list[NewItem]:
    def checked(text: str, *, allow_empty: bool = False) -> str:
        try:
            return validate_text(text, max_bytes=max_bytes) if text.strip() or not allow_empty \
                else text
        except InputError as err:
            raise InputError(f"message {index} ({role}): {err.message}") from err

    if role == "user":
        return [NewItem.user(checked(message))]
    if isinstance(message, str):  # sharegpt assistant
        return [NewItem.assistant(checked(message, allow_empty=True))]
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str):
            raise InputError(f"message {index} (tool) needs a 'tool_call_id'")
        return [NewItem.tool_result(call_id, checked(message["content"], allow_empty=True))]
    out = []
    if message["content"] or not message.get("tool_calls"):
        out.append(NewItem.assistant(checked(message["content"], allow_empty=True)))
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            raise InputError(f"message {index} has a tool call without 'id' and 'function'")
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError as err:
            raise InputError(f"message {index}: tool call {call['id']} has arguments that are "
                             f"not JSON ({err})") from err
        if not isinstance(arguments, dict):
            raise InputError(f"message {index}: tool call {call['id']} arguments must be a "
                             "JSON object")
        out.append(NewItem.tool_call(call["id"], str(function.get("name", "")), arguments))
    return out


@dataclass
class ImportReport:
    imported: list[dict[str, Any]] = field(default_factory=list)
    already_imported: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[BadRecord] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"imported": self.imported, "already_imported": self.already_imported,
                "skipped": [s.to_json() for s in self.skipped]}


def import_transcripts(store: Store, data: bytes, fmt: str, *, max_message_bytes: int,
                       source: str | None = None, clock: Callable[[], datetime] = utc_now,
                       progress: Callable[[int], None] | None = None) -> ImportReport:
    """Import every readable record of ``data``, one transaction per record."""
    report = ImportReport()
    for record in read_records(data, fmt, max_message_bytes=max_message_bytes):
        if progress is not None:
            progress(1)
        if isinstance(record, BadRecord):
            report.skipped.append(record)
            continue
        entry: dict[str, Any] = {"where": record.where, "source_id": record.source_id}
        existing = store.find_client_message(record.key)
        if existing is not None:
            report.already_imported.append({**entry, "conversation_id": existing.conversation_id})
            continue
        conversation_id = new_id("c_")
        origin = {"format": fmt, "source": source, "where": record.where,
                  "source_id": record.source_id}
        try:
            store.commit(Commit(
                conversation_id=conversation_id, created_at=clock(), expected_head=None,
                create=NewConversation(conversation_id, system=record.system,
                                       metadata={"imported": origin}),
                items=record.items))
        except ClientMessageConflict:  # the same record, imported concurrently
            winner = store.find_client_message(record.key)
            report.already_imported.append(
                {**entry, "conversation_id": None if winner is None else winner.conversation_id})
            continue
        report.imported.append({**entry, "conversation_id": conversation_id,
                                "items": len(record.items)})
    return report
