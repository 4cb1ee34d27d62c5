"""The audit export's reads over SQL, shared by the SQLite and PostgreSQL stores, like the log
in ``stores/relational.py``.

Requests are decoded in call order with the last few kept whole: each call's delta
(``stores/delta.py``) is applied to its base's decoded fields instead of walking the chain back
to its root, so reading every request of a conversation costs the requests' size, not the
square of the chain's length.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Collection
from datetime import datetime
from typing import Any

from threadline.calls import Rendering, SentRequest
from threadline.errors import StoreError
from threadline.items import Item, format_time
from threadline.stores.rows import item_from_row, stored_time
from threadline.stores.sessions import Database

_ITEM_COLUMNS = ("conversation_id, seq, branch, parent_seq, turn, kind, content, hash, "
                 "created_at, client_msg_id")
_KEEP_DECODED = 8  # a call's base is almost always one of the few calls just before it
_FIELDS = ("messages", "prompt", "tokens")  # as stores/delta.py encodes them


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
        decoded: OrderedDict[str, dict[str, Any]] = OrderedDict()
        out: dict[str, SentRequest] = {}
        last = max((i for i, row in enumerate(rows) if row[0] in wanted), default=-1)
        for call_id, base, text in rows[: last + 1]:
            deltas[call_id] = (base, json.loads(text))
            if call_id in wanted:
                fields = _fields(call_id, deltas, decoded)
                prompt, tokens = fields["prompt"], fields["tokens"]
                out[call_id] = SentRequest(
                    model=fields["model"], params=fields["params"],
                    messages=tuple(fields["messages"] or ()),
                    rendering=None if prompt is None else Rendering.of(prompt, tokens))
        return out


def _fields(call_id: str, deltas: dict[str, tuple[str | None, dict[str, Any]]],
            decoded: OrderedDict[str, dict[str, Any]]) -> dict[str, Any]:
    """The call's request fields, whole: its delta applied to its base's fields, the base's
    to theirs, back to fields decoded already or to the chain's root (each kept a while, as
    the next call's base is usually among the last few)."""
    chain: list[str] = []
    current: str | None = call_id
    while current is not None and current not in decoded:
        chain.append(current)
        current = deltas[current][0]
    whole = None if current is None else decoded[current]
    for step in reversed(chain):
        part = deltas[step][1]
        whole = {"model": part["model"], "params": part["params"],
                 **{name: _apply(None if whole is None else whole[name], part[name])
                    for name in _FIELDS}}
        decoded[step] = whole
        while len(decoded) > _KEEP_DECODED:
            decoded.popitem(last=False)
    assert whole is not None
    return whole


def _apply(base: Any, part: dict[str, Any] | None) -> Any:
    if part is None:
        return None
    keep, tail = part["keep"], part["tail"]
    if keep and (base is None or len(base) < keep):
        raise StoreError("a stored request refers to a base request that is missing; the "
                         "call log is damaged")
    return tail if not keep else base[:keep] + tail
