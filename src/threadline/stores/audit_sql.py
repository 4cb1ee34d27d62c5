"""The audit export's reads over SQL, shared by the SQLite and PostgreSQL stores, like the log
in ``stores/relational.py``.

Requests are decoded in call order with the last few kept whole: each call's delta is applied
to its base's decoded request instead of walking the chain back to its root, so reading every
request of a conversation costs the requests' size, not the square of the chain's length.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Collection
from datetime import datetime
from typing import Any

from threadline.calls import SentRequest
from threadline.items import Item, format_time
from threadline.stores import delta
from threadline.stores.rows import item_from_row, stored_time
from threadline.stores.sessions import Database

_ITEM_COLUMNS = ("conversation_id, seq, branch, parent_seq, turn, kind, content, hash, "
                 "created_at, client_msg_id")
_KEEP_DECODED = 8  # a call's base is almost always one of the few calls just before it


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

    def requests(self, conversation_id: str, call_ids: Collection[str]
                 ) -> dict[str, SentRequest]:
        wanted = set(call_ids)
        if not wanted:
            return {}
        with self._db.reading() as db:
            rows = db.all(f"SELECT id, base_call_id, request_delta FROM model_calls WHERE "
                          f"conversation_id = ? ORDER BY {self._order}", (conversation_id,))
        deltas: dict[str, tuple[str | None, dict[str, Any]]] = {}
        decoded: OrderedDict[str, SentRequest] = OrderedDict()
        out: dict[str, SentRequest] = {}
        last = max((i for i, row in enumerate(rows) if row[0] in wanted), default=-1)
        for call_id, base, text in rows[: last + 1]:
            deltas[call_id] = (base, json.loads(text))
            if call_id not in wanted:
                continue
            request = _decode(call_id, deltas, decoded)
            out[call_id] = request
            decoded[call_id] = request
            while len(decoded) > _KEEP_DECODED:
                decoded.popitem(last=False)
        return out


def _decode(call_id: str, deltas: dict[str, tuple[str | None, dict[str, Any]]],
            decoded: OrderedDict[str, SentRequest]) -> SentRequest:
    """The call's request: its delta, then its bases' back to one decoded already (as a delta
    that keeps nothing and adds all of it) or to the chain's root."""
    chain: list[dict[str, Any]] = []
    current: str | None = call_id
    while current is not None:
        known = decoded.get(current)
        if known is not None:
            chain.append(_whole(known))
            break
        base, part = deltas[current]
        chain.append(part)
        current = base
    return delta.decode(chain)


def _whole(request: SentRequest) -> dict[str, Any]:
    rendering = request.rendering
    tokens = None if rendering is None else rendering.tokens
    return {"model": request.model, "params": dict(request.params),
            "messages": {"keep": 0, "tail": list(request.messages)},
            "prompt": None if rendering is None else {"keep": 0, "tail": rendering.prompt},
            "tokens": None if tokens is None else {"keep": 0, "tail": list(tokens)}}
