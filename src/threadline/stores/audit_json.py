"""A batch's rows, as ``stores/audit_sql.py`` reads them, decoded for an audit export.

The export reads the log's JSON more than anything else, so it decodes it with msgspec (the
``audit`` extra) and only as far as it reads it: of a prefix report, its counts and cause; of a
response, its ``usage``; an item's content whole (any of it may be written). What it writes of
a response or a prefix report is the stored text itself, never a re-encoding. Imported only by
an export, so a store without the extra still opens.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from threadline.calls import CallStatus, SentRequest
from threadline.items import ItemKind
from threadline.stores.audit import (
    CANONICAL_JSON,
    RENDERED_PROMPT,
    ExactRequest,
    LoggedCall,
    LoggedItem,
)
from threadline.stores.delta_fields import DeltaFields

# ``LoggedItem``'s fields, in order
ITEM_COLUMNS = "conversation_id, seq, branch, turn, kind, content, hash, created_at"
# ``stores/rows.py: call_from_row``'s columns, then the request's delta and its base
CALL_COLUMNS = ("id, conversation_id, branch, turn, head_seq, reply_seq, status, model, "
                "response, prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms, "
                "started_at, error, prefix_report, purpose, base_call_id, request_delta")
_BASE, _DELTA = 18, 19


class PrefixCounts(msgspec.Struct, frozen=True):
    """What an export reads of a stored ``PrefixReport`` (``cache/prefix.py``); the rest of
    the report (its layout, divergence, detail) is skipped unparsed."""

    prompt_bytes: int
    reused_bytes: int
    prompt_tokens: int | None
    reused_tokens: int | None
    cause: str


class _Response(msgspec.Struct):
    usage: Any = None  # the provider's usage report, where the backend recorded one


_prefix = msgspec.json.Decoder(PrefixCounts)
_response = msgspec.json.Decoder(_Response)
_content = msgspec.json.Decoder()  # an item's content: untyped, as ``json.loads`` gives it
_KINDS = {kind.value: kind for kind in ItemKind}
_STATUSES = {status.value: str(status) for status in CallStatus}
_parse_time = datetime.fromisoformat


def _time(value: str | datetime) -> datetime:
    """``stores/rows.py: stored_time``, which the loops below inline for SQLite's text."""
    return _parse_time(value) if isinstance(value, str) else value.astimezone(UTC)


def items(rows: Iterable[Sequence[Any]]) -> list[LoggedItem]:
    """Rows of ``ITEM_COLUMNS`` as items."""
    decode, kinds = _content.decode, _KINDS
    return [LoggedItem(cid, seq, branch, turn, kinds.get(kind) or ItemKind(kind),
                       decode(content), digest,
                       _parse_time(at) if isinstance(at, str) else _time(at))
            for cid, seq, branch, turn, kind, content, digest, at in rows]


def calls(rows: Sequence[Sequence[Any]], start: datetime, end: datetime) -> list[LoggedCall]:
    """One conversation's rows of ``CALL_COLUMNS``, in call order; each call started in
    [start, end) with its exact request."""
    fields = DeltaFields({row[0]: (row[_BASE], row[_DELTA]) for row in rows})
    out = []
    for (cid, conversation_id, branch, turn, head_seq, reply_seq, status, model, response,
         prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms, started, error,
         prefix, purpose, _, _) in rows:
        started_at = _parse_time(started) if isinstance(started, str) else _time(started)
        out.append(LoggedCall(
            cid, conversation_id, branch, turn, head_seq, reply_seq,
            _STATUSES.get(status) or str(CallStatus(status)),
            model, prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms,
            started_at, error, purpose, response, prefix,
            None if prefix is None else _prefix.decode(prefix),
            _response.decode(response).usage,
            _exact(fields, cid) if start <= started_at < end else None))
    return out


def _exact(fields: DeltaFields, call_id: str) -> ExactRequest:
    """``SentRequest.exact_bytes`` of the call's request: the rendered prompt, or else the
    canonical JSON payload of model, messages and params."""
    prompt = fields.whole(call_id, "prompt")
    if prompt is not None:
        return ExactRequest(prompt.encode("utf-8"), RENDERED_PROMPT)
    delta = fields.delta(call_id)
    request = SentRequest(model=delta["model"], params=delta["params"],
                          messages=tuple(fields.whole(call_id, "messages") or ()))
    return ExactRequest(request.exact_bytes(), CANONICAL_JSON)
