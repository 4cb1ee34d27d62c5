"""Items: the append-only records a conversation is made of.

An item is one row of the log, keyed ``(conversation_id, seq)``. Its content is canonical JSON
(sorted keys, no insignificant whitespace, UTF-8), and its hash chains the content to the
parent item's hash, tagged with the algorithm (``b2:`` is BLAKE2b-256), so a branch can be
re-verified end to end and two identical histories hash identically wherever they live.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from threadline.errors import EmptyMessage, InputError, InvalidEncoding, MessageTooLarge

HASH_PREFIX = "b2:"
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class ItemKind(StrEnum):
    USER = "user_message"
    ASSISTANT = "assistant_message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    NOTE = "note"
    COMPACTION = "compaction"
    CONSTRAINT = "constraint"                  # a standing instruction, with its provenance
    CONSTRAINT_REMOVED = "constraint_removed"  # the user withdrew one
    WORKING_STATE = "working_state"            # the task's goal, plan, decisions, facts
    RETRIEVAL = "retrieval"                    # a turn's rewritten query and its passages
    RECALL = "memory_recall"                   # the memories a turn recalled, with provenance
    CONTEXT = "context"                        # what another context provider found for a turn


# Kinds that steer what the model sees without being messages themselves.
CONTROL_KINDS = frozenset({ItemKind.NOTE, ItemKind.COMPACTION, ItemKind.CONSTRAINT,
                           ItemKind.CONSTRAINT_REMOVED, ItemKind.WORKING_STATE,
                           ItemKind.RETRIEVAL, ItemKind.RECALL, ItemKind.CONTEXT})


# Required content fields per kind, and their JSON types. Extra fields are allowed and kept.
_REQUIRED: dict[ItemKind, dict[str, type | tuple[type, ...]]] = {
    ItemKind.USER: {"text": str},
    ItemKind.ASSISTANT: {"text": str},
    ItemKind.TOOL_CALL: {"call_id": str, "name": str, "arguments": dict},
    ItemKind.TOOL_RESULT: {"call_id": str, "output": str},
    ItemKind.NOTE: {"text": str},
    ItemKind.COMPACTION: {"strategy": str},
    ItemKind.CONSTRAINT: {"text": str, "source": str},
    ItemKind.CONSTRAINT_REMOVED: {"constraint_seq": int},
    ItemKind.WORKING_STATE: {"state": dict},
    ItemKind.RETRIEVAL: {"raw": str, "query": str, "passages": list},
    ItemKind.RECALL: {"query": str, "memories": list},
    ItemKind.CONTEXT: {"provider": str},
}


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False)  # stateless: one instance serves every call


def canonical_json(value: Any) -> str:
    """The one serialisation threadline hashes and stores: stable across processes and runs."""
    return _CANONICAL.encode(value)


def chain_hash(parent_hash: str | None, kind: ItemKind, content: Mapping[str, Any]) -> str:
    """Hash of an item: BLAKE2b-256 over the canonical JSON of
    ``{"content": …, "kind": …, "parent": …}``, tagged ``b2:``."""
    return chain_hash_json(parent_hash, kind, canonical_json(content))


def chain_hash_json(parent_hash: str | None, kind: ItemKind, content_json: str) -> str:
    """:func:`chain_hash` for content already in canonical JSON (the bytes are identical:
    canonical JSON of a dict embeds its values' canonical JSON)."""
    body = (f'{{"content":{content_json},"kind":{canonical_json(str(kind))},'
            f'"parent":{canonical_json(parent_hash)}}}')
    return _blake2b(body)


# What a chat client sees of a conversation: its user and assistant messages, by role.
VISIBLE_ROLES = {ItemKind.USER: "user", ItemKind.ASSISTANT: "assistant"}


def transcript_root(system: str | None) -> str:
    """Where a conversation's transcript hash starts: its system prompt."""
    return _blake2b(canonical_json({"system": system}))


def transcript_hash(parent: str, role: str, text: str) -> str:
    """The transcript hash after one more visible message: chained over the system prompt
    and the user and assistant messages only, so a client that resends its history can be
    matched to the log without knowing the context items the log holds between them."""
    return _blake2b(canonical_json({"parent": parent, "role": role, "text": text}))


def transcript_after(parent: str, kind: ItemKind, content: Mapping[str, Any]) -> str:
    """``parent`` moved on by an item: by a message, or unchanged by anything else."""
    role = VISIBLE_ROLES.get(kind)
    text = content.get("text")
    return parent if role is None or not isinstance(text, str) else \
        transcript_hash(parent, role, text)


def _blake2b(body: str) -> str:
    return HASH_PREFIX + hashlib.blake2b(body.encode("utf-8"), digest_size=32).hexdigest()


def new_id(prefix: str) -> str:
    """A time-ordered unique id (ULID layout: 48-bit milliseconds + 80 random bits)."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = [_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5)]
    return prefix + "".join(chars).lower()


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """UTC with microseconds and a Z: sorts as text in time order."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def validate_content(kind: ItemKind, content: Mapping[str, Any]) -> str:
    """The content's canonical JSON, or InputError if it lacks what ``kind`` requires."""
    for name, expected in _REQUIRED[kind].items():
        value = content.get(name)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise InputError(f"a {kind} item needs a {name!r} field of type "
                             f"{getattr(expected, '__name__', expected)}; got {value!r:.60}")
    try:
        return canonical_json(content)
    except (TypeError, ValueError) as err:
        raise InputError(f"a {kind} item's content is not JSON-serialisable: {err}") from err


def decode_utf8(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InvalidEncoding(where, err) from err


def validate_text(text: str, *, max_bytes: int) -> str:
    """The message as it will be stored, or an InputError saying what is wrong with it."""
    if not text.strip():
        raise EmptyMessage()
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as err:
        raise InputError(f"the message contains a character that is not valid Unicode "
                         f"(at offset {err.start}); nothing was saved",
                         hint="check how the text was decoded") from err
    if size > max_bytes:
        raise MessageTooLarge(size, max_bytes)
    return text


@dataclass(frozen=True)
class NewItem:
    """An item not yet appended: what a caller hands to the store."""

    kind: ItemKind
    content: Mapping[str, Any]
    client_msg_id: str | None = None
    content_json: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "content_json", validate_content(self.kind, self.content))

    @classmethod
    def user(cls, text: str, *, client_msg_id: str | None = None) -> NewItem:
        return cls(ItemKind.USER, {"text": text}, client_msg_id)

    @classmethod
    def assistant(cls, text: str) -> NewItem:
        return cls(ItemKind.ASSISTANT, {"text": text})

    @classmethod
    def tool_call(cls, call_id: str, name: str, arguments: Mapping[str, Any]) -> NewItem:
        return cls(ItemKind.TOOL_CALL, {"call_id": call_id, "name": name,
                                        "arguments": dict(arguments)})

    @classmethod
    def tool_result(cls, call_id: str, output: str, *, is_error: bool = False) -> NewItem:
        return cls(ItemKind.TOOL_RESULT, {"call_id": call_id, "output": output,
                                          "is_error": is_error})

    @classmethod
    def note(cls, text: str, **extra: Any) -> NewItem:
        return cls(ItemKind.NOTE, {"text": text, **extra})


def item_text(kind: ItemKind, content: Mapping[str, Any]) -> str:
    """An item's human-readable text, whatever its kind (``Item.text``)."""
    for name in ("text", "output", "summary"):
        value = content.get(name)
        if isinstance(value, str):
            return value
    if kind is ItemKind.TOOL_CALL:
        return f"{content['name']}({canonical_json(content['arguments'])})"
    return canonical_json(content)


@dataclass(frozen=True)
class Item:
    """An appended item, as read back from the store."""

    conversation_id: str
    seq: int
    branch: str
    parent_seq: int | None
    turn: int
    kind: ItemKind
    content: Mapping[str, Any]
    hash: str
    created_at: datetime
    client_msg_id: str | None = None

    @property
    def text(self) -> str:
        """The item's human-readable text, whatever its kind."""
        return item_text(self.kind, self.content)

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "seq": self.seq,
            "branch": self.branch,
            "parent_seq": self.parent_seq,
            "turn": self.turn,
            "kind": str(self.kind),
            "content": dict(self.content),
            "hash": self.hash,
            "created_at": format_time(self.created_at),
            "client_msg_id": self.client_msg_id,
        }


def is_empty_user_message(item: Item) -> bool:
    """A user message with no text. Only an import records one (a transcript's empty turn is
    kept, so the rest of it is not lost); it is no turn to answer, so no request carries it."""
    return item.kind is ItemKind.USER and not item.content["text"].strip()


def chain_items(conversation_id: str, new_items: Iterable[NewItem], *,
                created_at: datetime, branch: str = "main") -> list[Item]:
    """The items a store would append to an empty branch, built in memory (seq from 1, parent
    links, turns and chained hashes): for replays, simulations and tests."""
    out: list[Item] = []
    for new in new_items:
        out.append(next_item(out, new, conversation_id=conversation_id,
                             created_at=created_at, branch=branch))
    return out


def next_item(history: Sequence[Item], new: NewItem, *, conversation_id: str | None = None,
              created_at: datetime | None = None, branch: str | None = None) -> Item:
    """``new`` as a store would append it after ``history`` (in memory: for measuring a plan,
    replays and tests). Unset fields follow the last item."""
    parent = history[-1] if history else None
    if parent is None and (conversation_id is None or created_at is None):
        raise ValueError("the first item needs a conversation id and a creation time")
    turn = (parent.turn if parent else 0) + (new.kind is ItemKind.USER)
    return Item(conversation_id or parent.conversation_id,  # type: ignore[union-attr]
                parent.seq + 1 if parent else 1,
                branch or (parent.branch if parent else "main"),
                parent.seq if parent else None, turn, new.kind, new.content,
                chain_hash_json(parent.hash if parent else None, new.kind, new.content_json),
                created_at or parent.created_at,  # type: ignore[union-attr]
                new.client_msg_id)


@dataclass(frozen=True)
class Conversation:
    id: str
    created_at: datetime
    title: str | None = None
    system: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    owner: str | None = None  # the user whose conversation it is (None: no one's, admin only)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "created_at": format_time(self.created_at), "title": self.title,
                "system": self.system, "metadata": dict(self.metadata), "owner": self.owner}


@dataclass(frozen=True)
class Branch:
    """A line of history. ``main`` has no fork point; a fork grows from ``fork_seq``."""

    conversation_id: str
    name: str
    created_at: datetime
    parent: str | None = None
    fork_seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "parent": self.parent, "fork_seq": self.fork_seq,
                "created_at": format_time(self.created_at)}
