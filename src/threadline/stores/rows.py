"""Rows of the log's tables back into objects, the same for SQLite and PostgreSQL (times are
ISO text in one and timestamps in the other)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from threadline.calls import CallStatus, ModelCall, SentRequest, Timings, Usage
from threadline.items import Conversation, Item, ItemKind, parse_time
from threadline.stores.records import ConversationSummary


def request_size(request: SentRequest) -> int:
    """A rough memory estimate: the prompt, plus a few hundred bytes per message and token."""
    rendering = request.rendering
    if rendering is None:
        return 300 * len(request.messages)
    return rendering.chars + 300 * len(request.messages) + 30 * (rendering.n_tokens or 0)


def stored_time(value: str | datetime) -> datetime:
    """A stored moment: ISO text (SQLite) or a timestamp (PostgreSQL), as UTC."""
    return parse_time(value) if isinstance(value, str) else value.astimezone(UTC)


CONVERSATION_COLUMNS = "id, created_at, title, system, metadata, owner"


def conversation_from_row(row: Sequence[Any]) -> Conversation:
    """A row of ``CONVERSATION_COLUMNS``."""
    return Conversation(id=row[0], created_at=stored_time(row[1]), title=row[2], system=row[3],
                        metadata=json.loads(row[4]), owner=row[5])


# a conversation with its counts, newest activity (``updated``) and first message, from
# ``conversations c``: what listing and browsing conversations read
SUMMARY_COLUMNS = (
    ", ".join(f"c.{column}" for column in CONVERSATION_COLUMNS.split(", ")) + ","
    " (SELECT count(*) FROM items i WHERE i.conversation_id = c.id),"
    " (SELECT coalesce(max(turn), 0) FROM items i WHERE i.conversation_id = c.id),"
    " (SELECT count(*) FROM branches b WHERE b.conversation_id = c.id),"
    " (SELECT count(*) FROM model_calls m WHERE m.conversation_id = c.id),"
    " coalesce((SELECT max(created_at) FROM items i WHERE i.conversation_id = c.id),"
    "          c.created_at) AS updated,"
    " (SELECT content FROM items i WHERE i.conversation_id = c.id"
    "  AND kind = 'user_message' ORDER BY seq LIMIT 1)")


def summary_from_row(row: Sequence[Any]) -> ConversationSummary:
    """A row of ``SUMMARY_COLUMNS``."""
    return ConversationSummary(
        conversation=conversation_from_row(row[:6]), items=row[6], turns=row[7],
        branches=row[8], calls=row[9], updated_at=stored_time(row[10]),
        first_message=None if row[11] is None else json.loads(row[11]).get("text"))


_KINDS = {kind.value: kind for kind in ItemKind}  # a lookup, not an enum call, per item

ITEM_COLUMNS = ("conversation_id, seq, branch, parent_seq, turn, kind, content, hash, "
                "created_at, client_msg_id")
CALL_COLUMNS = ("id, conversation_id, branch, turn, head_seq, reply_seq, status, model, "
                "response, prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms, "
                "started_at, error, prefix_report, purpose")


def item_from_row(row: Sequence[Any], loads: Callable[[str], Any] = json.loads) -> Item:
    """A row of ``ITEM_COLUMNS``; ``loads`` decodes the content: the audit export's is faster
    (``stores/audit_json.py``)."""
    return Item(conversation_id=row[0], seq=row[1], branch=row[2], parent_seq=row[3],
                turn=row[4], kind=_KINDS.get(row[5]) or ItemKind(row[5]),
                content=loads(row[6]), hash=row[7],
                created_at=stored_time(row[8]), client_msg_id=row[9])


def call_from_row(row: Sequence[Any], request: SentRequest | None) -> ModelCall:
    """A row of ``CALL_COLUMNS``, with its request where it was read."""
    return ModelCall(
        id=row[0], conversation_id=row[1], branch=row[2], turn=row[3], head_seq=row[4],
        reply_seq=row[5], status=CallStatus(row[6]), model=row[7], request=request,
        response=json.loads(row[8]),
        usage=Usage(prompt_tokens=row[9], cached_tokens=row[10], completion_tokens=row[11]),
        timings=Timings(ttft_ms=row[12], total_ms=row[13]), started_at=stored_time(row[14]),
        error=row[15], prefix=None if row[16] is None else json.loads(row[16]), purpose=row[17])
