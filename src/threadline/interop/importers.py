"""Reading other systems' transcripts into threadline conversations.

Formats:

``openai-messages``
    ``{role, content}`` messages (OpenAI chat completions; ``developer`` counts as system).
    The file is a JSON array of messages (one conversation), of conversations, or an object
    with a ``messages`` array; or JSON Lines, each line an array of messages, an object with
    a ``messages`` array (the fine-tuning layout), or one message: consecutive one-message
    lines are one conversation, split where their ``conversation_id`` changes
    (``interop/layout.py``).
``sharegpt``
    Records ``{"id": …, "conversations": [{"from", "value"}]}``: JSON Lines, a JSON array of
    them, or one record.

A record becomes one conversation, imported whole in one transaction or not at all. A record
that cannot be read is reported with its line (or position) and skipped; the rest go on.
An empty message (no text, or only whitespace) is kept as an item with its text as it was,
rather than refusing the record and losing every other turn of it; an empty user message is
never sent to a model (``is_empty_user_message``). A tool message is recorded untrusted, as
a live tool result is, so it is fenced as data in every request and every summary. Each
record carries an import key (a hash of its content), so importing a file twice does not
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
from threadline.interop.layout import BadRecord, Chunk, chunks
from threadline.items import ItemKind, NewItem, canonical_json, new_id, utc_now, validate_text
from threadline.stores.base import Commit, NewConversation, Store

FORMATS = ("openai-messages", "sharegpt")
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant",
                   "bard": "assistant", "bing": "assistant", "assistant": "assistant",
                   "model": "assistant", "system": "system"}


@dataclass(frozen=True)
class ImportRecord:
    where: str  # "line 17", "lines 3-9", or "record 3" in a JSON array
    key: str    # identifies the record's content; stored as its first item's client id
    items: list[NewItem]
    system: str | None = None
    source_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    empty: int = 0  # user and assistant messages kept with no text


def read_records(data: bytes, fmt: str, *,
                 max_message_bytes: int) -> Iterator[ImportRecord | BadRecord]:
    """Parse ``data`` in ``fmt``, yielding a record or a reason to skip it, one per entry."""
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown import format {fmt!r}; choose one of: "
                                f"{', '.join(FORMATS)}")
    is_message = _is_openai_message if fmt == "openai-messages" else _never
    for chunk in chunks(data, is_message):
        if isinstance(chunk, BadRecord):
            yield chunk
            continue
        try:
            yield _record(chunk, fmt, max_message_bytes)
        except InputError as err:
            yield BadRecord(chunk.where, err.message)


def _is_openai_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value and "messages" not in value


def _never(value: Any) -> bool:  # a ShareGPT file holds whole records only
    return False


def _record(chunk: Chunk, fmt: str, max_bytes: int) -> ImportRecord:
    raw = chunk.raw
    key = "import:" + hashlib.blake2b(canonical_json([fmt, raw]).encode("utf-8"),
                                      digest_size=16).hexdigest()
    source_id = chunk.source_id
    if fmt == "sharegpt":
        if not isinstance(raw, dict) or not isinstance(raw.get("conversations"), list):
            raise InputError("expected an object with a 'conversations' array")
        source_id = raw.get("id") if isinstance(raw.get("id"), str) else None
        messages = [_sharegpt_message(f"message {i}", m)
                    for i, m in enumerate(raw["conversations"], 1)]
    else:
        if isinstance(raw, dict) and isinstance(raw.get("messages"), list):
            raw = raw["messages"]
        if not isinstance(raw, list):
            raise InputError("expected an array of messages, an object with a 'messages' "
                             "array, or one message with a 'role'")
        labels = [f"line {n}" for n in chunk.lines] or \
            [f"message {i}" for i in range(1, len(raw) + 1)]
        messages = [_openai_message(label, m) for label, m in zip(labels, raw, strict=True)]
    system_parts: list[str] = []
    items: list[NewItem] = []
    for label, role, message in messages:
        if role == "system":
            if items:
                raise InputError(f"{label} is a system message after the conversation "
                                 "started; only leading system messages are supported")
            system_parts.append(message)
            continue
        items.extend(_items(label, role, message, max_bytes))
    if not items:
        raise InputError("the record has no user or assistant messages")
    empty = sum(1 for item in items if _empty(item))
    if empty == len(items):
        raise InputError("every message of the record is empty: there is nothing to import")
    first = items[0]
    items[0] = NewItem(first.kind, first.content, client_msg_id=key)
    return ImportRecord(where=chunk.where, key=key, items=items,
                        system="\n\n".join(system_parts) or None, source_id=source_id,
                        empty=empty)


def _empty(item: NewItem) -> bool:
    return item.kind in (ItemKind.USER, ItemKind.ASSISTANT) and not item.content["text"].strip()


def _sharegpt_message(label: str, message: Any) -> tuple[str, str, Any]:
    if not isinstance(message, dict) or not isinstance(message.get("value"), str):
        raise InputError(f"{label} needs a string 'value'")
    role = _SHAREGPT_ROLES.get(str(message.get("from", "")).lower())
    if role is None:
        raise InputError(f"{label} is from {message.get('from')!r}; expected one of: "
                         f"{', '.join(sorted(_SHAREGPT_ROLES))}")
    return label, role, message["value"]


def _openai_message(label: str, message: Any) -> tuple[str, str, Any]:
    if not isinstance(message, dict):
        raise InputError(f"{label} is not an object")
    role = message.get("role")
    if role == "developer":
        role = "system"
    if role not in ("system", "user", "assistant", "tool"):
        raise InputError(f"{label} has role {role!r}; expected system, developer, "
                         "user, assistant or tool")
    content = message.get("content")
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in ("text", "input_text",
                                                                       "output_text"):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise InputError(f"{label} has a {kind!r} content part; only text "
                                 "parts can be imported")
            texts.append(str(part.get("text", "")))
        content = "".join(texts)
    if content is not None and not isinstance(content, str):
        raise InputError(f"{label} has content of type {type(content).__name__}")
    if role in ("system", "user"):
        return label, role, content or ""
    return label, role, {**message, "content": content or ""}


def _items(label: str, role: str, message: Any, max_bytes: int) -> list[NewItem]:
    def checked(text: str) -> str:
        if not text.strip():  # kept as it was; no request ever carries an empty user message
            return text
        try:
            return validate_text(text, max_bytes=max_bytes)
        except InputError as err:
            raise InputError(f"{label} ({role}): {err.message}") from err

    if role == "user":
        return [NewItem.user(checked(message))]
    if isinstance(message, str):  # sharegpt assistant
        return [NewItem.assistant(checked(message))]
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str):
            raise InputError(f"{label} (tool) needs a 'tool_call_id'")
        # a tool's output, whoever recorded it: data, not instructions, as in a live turn
        result = NewItem.tool_result(call_id, checked(message["content"]))
        return [NewItem(result.kind, {**result.content, "untrusted": True})]
    out = []
    if message["content"] or not message.get("tool_calls"):
        out.append(NewItem.assistant(checked(message["content"])))
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            raise InputError(f"{label} has a tool call without 'id' and 'function'")
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError as err:
            raise InputError(f"{label}: tool call {call['id']} has arguments that are "
                             f"not JSON ({err})") from err
        if not isinstance(arguments, dict):
            raise InputError(f"{label}: tool call {call['id']} arguments must be a "
                             "JSON object")
        out.append(NewItem.tool_call(call["id"], str(function.get("name", "")), arguments))
    return out


@dataclass
class ImportReport:
    imported: list[dict[str, Any]] = field(default_factory=list)
    already_imported: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[BadRecord] = field(default_factory=list)

    @property
    def empty_messages(self) -> int:
        """Empty messages kept in the conversations this import created."""
        return sum(entry["empty_messages"] for entry in self.imported)

    def to_json(self) -> dict[str, Any]:
        return {"imported": self.imported, "already_imported": self.already_imported,
                "skipped": [s.to_json() for s in self.skipped],
                "empty_messages": self.empty_messages}


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
                                "items": len(record.items), "empty_messages": record.empty})
    return report
