"""The audit export's reads over SQL, shared by the SQLite and PostgreSQL stores, like the log
in ``stores/relational.py``.

A batch of conversations is read in three statements (items, branches, calls with their
request deltas), whatever its size; each call's exact request is rebuilt from the deltas
(``stores/delta_fields.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from typing import Any

from threadline.calls import SentRequest
from threadline.items import Branch, Item, format_time
from threadline.stores.audit import (
    CANONICAL_JSON,
    RENDERED_PROMPT,
    ExactRequest,
    LoggedCall,
    LoggedConversation,
)
from threadline.stores.delta_fields import DeltaFields
from threadline.stores.rows import call_from_row, item_from_row, stored_time
from threadline.stores.sessions import Database

_ITEM_COLUMNS = ("conversation_id, seq, branch, parent_seq, turn, kind, content, hash, "
                 "created_at, client_msg_id")
# ``stores/rows.py: call_from_row``'s columns, then the request's delta and its base
_CALL_COLUMNS = ("id, conversation_id, branch, turn, head_seq, reply_seq, status, model, "
                 "response, prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms, "
                 "started_at, error, prefix_report, purpose, base_call_id, request_delta")
_RESPONSE, _PREFIX, _BASE, _DELTA = 8, 16, 18, 19
_by_conversation = itemgetter(0)


class SQLAudit:
    def __init__(self, db: Database, call_order: str) -> None:
        self._db, self._order = db, call_order

    def first_activity(self, start: datetime, end: datetime) -> datetime | None:
        window = (format_time(start), format_time(end))
        with self._db.reading() as db:
            row = db.one("SELECT (SELECT min(created_at) FROM items WHERE created_at >= ? "
                         "AND created_at < ?), (SELECT min(started_at) FROM model_calls "
                         "WHERE started_at >= ? AND started_at < ?)", window + window)
        found = [stored_time(value) for value in row if value is not None]
        return min(found) if found else None

    def active(self, start: datetime, end: datetime) -> list[str]:
        window = (format_time(start), format_time(end))
        with self._db.reading() as db:
            rows = db.all("SELECT conversation_id FROM items WHERE created_at >= ? AND "
                          "created_at < ? UNION SELECT conversation_id FROM model_calls "
                          "WHERE started_at >= ? AND started_at < ?", window + window)
        return sorted(str(row[0]) for row in rows)

    def items(self, conversation_id: str) -> list[Item]:
        with self._db.reading() as db:
            rows = db.all(f"SELECT {_ITEM_COLUMNS} FROM items WHERE conversation_id = ? "
                          "ORDER BY seq", (conversation_id,))
        return [item_from_row(row) for row in rows]

    def conversations(self, conversation_ids: Sequence[str], start: datetime, end: datetime
                      ) -> list[LoggedConversation]:
        if not conversation_ids:
            return []
        ids = tuple(conversation_ids)
        among = f"conversation_id IN ({', '.join('?' * len(ids))})"
        with self._db.reading() as db:
            items = db.all(f"SELECT {_ITEM_COLUMNS} FROM items WHERE {among} "
                           "ORDER BY conversation_id, seq", ids)
            branches = db.all("SELECT conversation_id, name, created_at, parent, fork_seq "
                              f"FROM branches WHERE {among} ORDER BY conversation_id, "
                              "created_at, name", ids)
            calls = db.all(f"SELECT {_CALL_COLUMNS} FROM model_calls WHERE {among} "
                           f"ORDER BY conversation_id, {self._order}", ids)
        items_of = {cid: [item_from_row(r) for r in rows]
                    for cid, rows in groupby(items, _by_conversation)}
        branches_of = {cid: [Branch(cid, r[1], stored_time(r[2]), r[3], r[4]) for r in rows]
                       for cid, rows in groupby(branches, _by_conversation)}
        calls_of: dict[str, list[Any]] = {}
        for row in calls:  # by conversation, in call order
            calls_of.setdefault(row[1], []).append(row)
        return [LoggedConversation(cid, items_of.get(cid, []), branches_of[cid],
                                   _calls(calls_of.get(cid, []), start, end))
                for cid in ids if cid in branches_of]  # every conversation has a branch


def _calls(rows: list[Any], start: datetime, end: datetime) -> list[LoggedCall]:
    fields = DeltaFields({row[0]: (row[_BASE], row[_DELTA]) for row in rows})
    out = []
    for row in rows:
        call = call_from_row(row, None)
        exact = _exact(fields, call.id) if start <= call.started_at < end else None
        out.append(LoggedCall(call, row[_RESPONSE], row[_PREFIX], exact))
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
