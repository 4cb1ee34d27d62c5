"""The audit export's reads over SQL, shared by the SQLite and PostgreSQL stores, like the log
in ``stores/relational.py``.

A batch of conversations is read in three statements (calls with their request deltas; then
items and branches), whatever its size; the rows are decoded by ``stores/audit_json.py``, each
call's exact request rebuilt from the deltas (``stores/delta_fields.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from itertools import groupby
from operator import itemgetter
from typing import Any

from threadline.items import Branch, Item, format_time
from threadline.stores.audit import LoggedCall, LoggedConversation
from threadline.stores.rows import ITEM_COLUMNS, item_from_row, stored_time
from threadline.stores.sessions import Database

_by_conversation = itemgetter(0)


class SQLAudit:
    def __init__(self, db: Database, call_order: str, utc_day: str) -> None:
        """``utc_day``: the dialect's SQL for a stored time's UTC date, ``{}`` the column."""
        self._db, self._order = db, call_order
        # covered by the items_by_time and model_calls_by_time indexes: no row is read
        self._activity = (
            f"SELECT {utc_day.format('created_at')}, conversation_id FROM items "
            "WHERE created_at >= ? AND created_at < ? UNION "
            f"SELECT {utc_day.format('started_at')}, conversation_id FROM model_calls "
            "WHERE started_at >= ? AND started_at < ?")

    def activity(self, start: datetime, end: datetime) -> dict[date, list[str]]:
        window = (format_time(start), format_time(end))
        with self._db.reading() as db:
            rows = db.all(self._activity, window + window)
        by_day: dict[date, list[str]] = {}
        for day, cid in rows:
            by_day.setdefault(day if isinstance(day, date) else date.fromisoformat(day),
                              []).append(str(cid))
        return {day: sorted(by_day[day]) for day in sorted(by_day)}

    def items(self, conversation_id: str) -> list[Item]:
        with self._db.reading() as db:
            rows = db.all(f"SELECT {ITEM_COLUMNS} FROM items WHERE conversation_id = ? "
                          "ORDER BY seq", (conversation_id,))
        return [item_from_row(row) for row in rows]

    def calls(self, conversation_ids: Sequence[str], start: datetime, end: datetime
              ) -> dict[str, list[LoggedCall]]:
        if not conversation_ids:
            return {}
        from threadline.stores import audit_json  # the audit extra's decoders: an export's own

        ids = tuple(conversation_ids)
        with self._db.reading() as db:
            rows = db.all(f"SELECT {audit_json.CALL_COLUMNS} FROM model_calls WHERE "
                          f"{_among(ids)} ORDER BY conversation_id, {self._order}", ids)
        calls_of: dict[str, list[Any]] = {}
        for row in rows:  # by conversation, in call order
            calls_of.setdefault(row[1], []).append(row)
        return {cid: audit_json.calls(calls_of[cid], start, end) for cid in ids
                if cid in calls_of}

    def conversations(self, conversation_ids: Sequence[str]) -> list[LoggedConversation]:
        if not conversation_ids:
            return []
        from threadline.stores import audit_json

        ids = tuple(conversation_ids)
        with self._db.reading() as db:
            items = db.all(f"SELECT {audit_json.ITEM_COLUMNS} FROM items WHERE {_among(ids)} "
                           "ORDER BY conversation_id, seq", ids)
            branches = db.all("SELECT conversation_id, name, created_at, parent, fork_seq "
                              f"FROM branches WHERE {_among(ids)} ORDER BY conversation_id, "
                              "created_at, name", ids)
        items_of = {cid: audit_json.items(rows)
                    for cid, rows in groupby(items, _by_conversation)}
        branches_of = {cid: [Branch(cid, r[1], stored_time(r[2]), r[3], r[4]) for r in rows]
                       for cid, rows in groupby(branches, _by_conversation)}
        return [LoggedConversation(cid, items_of.get(cid, []), branches_of[cid])
                for cid in ids if cid in branches_of]  # every conversation has a branch


def _among(ids: Sequence[str]) -> str:
    return f"conversation_id IN ({', '.join('?' * len(ids))})"
