"""The inspector's page reads over SQL, shared by the SQLite and PostgreSQL stores, like the log
in ``stores/relational.py``.

Every walk is a range on an index the log has: items by ``(conversation_id, branch, seq)``,
calls by ``(conversation_id, branch)`` in the order they were recorded (SQLite's rowid is the
index's last column; PostgreSQL's index names ``position``), read in chunks from one end and
stopped when the page is full, so no read visits the rest of a long branch.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from threadline.calls import ModelCall
from threadline.items import Item, ItemKind
from threadline.stores.browse import ConversationQuery, Lineage
from threadline.stores.records import ConversationSummary, Generation
from threadline.stores.rows import (
    CALL_COLUMNS,
    ITEM_COLUMNS,
    SUMMARY_COLUMNS,
    call_from_row,
    item_from_row,
    summary_from_row,
)
from threadline.stores.sessions import Database

_CALL_CHUNK = 64
_MESSAGES = ("user_message", "assistant_message")
_SUMMARY = ("SELECT " + SUMMARY_COLUMNS + " FROM conversations c {where}"
            " ORDER BY updated {order}, c.id {order} LIMIT ? OFFSET ?")


def like_pattern(text: str, *, as_json: bool = False) -> str:
    """A LIKE pattern matching ``text`` anywhere, lower-cased, with ``%``, ``_`` and the
    escape character taken literally. ``as_json``: as the text appears inside a JSON string
    (quotes, backslashes and control characters escaped), for matching stored content."""
    if as_json:
        text = json.dumps(text, ensure_ascii=False)[1:-1]
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class SQLBrowse:
    def __init__(self, db: Database, call_order: str) -> None:
        self._db, self._order = db, call_order

    def conversations(self, query: ConversationQuery) -> list[ConversationSummary]:
        where: list[str] = []
        params: list[Any] = []
        if query.owner is not None:
            where.append("c.owner = ?")
            params.append(query.owner)
        if query.title:
            where.append("lower(coalesce(c.title, '')) LIKE ? ESCAPE '\\'")
            params.append(like_pattern(query.title))
        if query.text:
            where.append("(lower(coalesce(c.title, '')) LIKE ? ESCAPE '\\' OR EXISTS ("
                         "SELECT 1 FROM items i WHERE i.conversation_id = c.id AND i.kind IN "
                         "(?, ?) AND lower(i.content) LIKE ? ESCAPE '\\'))")
            params += [like_pattern(query.text), *_MESSAGES,
                       like_pattern(query.text, as_json=True)]
        sql = _SUMMARY.format(where=("WHERE " + " AND ".join(where)) if where else "",
                              order="ASC" if query.oldest_first else "DESC")
        with self._db.reading() as db:
            rows = db.all(sql, [*params, max(query.limit, 0), max(query.offset, 0)])
        return [summary_from_row(row) for row in rows]

    def items_before(self, conversation_id: str, lineage: Lineage, before: int,
                     limit: int) -> list[Item]:
        out: list[Item] = []
        with self._db.reading() as db:
            for name, last in lineage:  # newest segment first: their seqs do not overlap
                if len(out) >= limit:
                    break
                rows = db.all(f"SELECT {ITEM_COLUMNS} FROM items WHERE conversation_id = ? "
                              "AND branch = ? AND seq <= ? ORDER BY seq DESC LIMIT ?",
                              (conversation_id, name, min(last, before - 1), limit - len(out)))
                out += map(item_from_row, rows)
        return out

    def items_after(self, conversation_id: str, lineage: Lineage, after: int,
                    limit: int) -> list[Item]:
        out: list[Item] = []
        with self._db.reading() as db:
            for name, last in reversed(lineage):  # the root first
                if len(out) >= limit:
                    break
                if last <= after:
                    continue
                rows = db.all(f"SELECT {ITEM_COLUMNS} FROM items WHERE conversation_id = ? "
                              "AND branch = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                              (conversation_id, name, after, last, limit - len(out)))
                out += map(item_from_row, rows)
        return out

    def items_of_kinds(self, conversation_id: str, lineage: Lineage,
                       kinds: Collection[ItemKind], after: int = 0) -> list[Item]:
        names = sorted(str(k) for k in kinds)
        if not names:
            return []
        marks = ", ".join("?" for _ in names)
        out: list[Item] = []
        with self._db.reading() as db:
            for name, last in reversed(lineage):
                if last <= after:
                    continue
                rows = db.all(f"SELECT {ITEM_COLUMNS} FROM items WHERE conversation_id = ? "
                              f"AND branch = ? AND seq > ? AND seq <= ? AND kind IN ({marks}) "
                              "ORDER BY seq", (conversation_id, name, after, last, *names))
                out += map(item_from_row, rows)
        return out

    def calls_in_turns(self, conversation_id: str, branch: str, first: int, last: int, *,
                       from_newest: bool) -> list[ModelCall]:
        order = self._order
        sign, direction = ("<", "DESC") if from_newest else (">", "ASC")
        position: int | None = None
        found: list[ModelCall] = []
        with self._db.reading() as db:
            while True:
                bound = "" if position is None else f" AND {order} {sign} ?"
                rows = db.all(f"SELECT {CALL_COLUMNS}, {order} FROM model_calls WHERE "
                              f"conversation_id = ? AND branch = ?{bound} "
                              f"ORDER BY {order} {direction} LIMIT ?",
                              (conversation_id, branch,
                               *(() if position is None else (position,)), _CALL_CHUNK))
                for row in rows:
                    turn = row[3]
                    # a turn's calls are recorded in turn order (under its lease); only the
                    # memory writer's side calls come later, so only the others end the walk
                    past = turn < first if from_newest else turn > last
                    if past and row[17] != "memory":
                        return _in_order(found, from_newest)
                    if first <= turn <= last:
                        found.append(call_from_row(row[:-1], None))
                if len(rows) < _CALL_CHUNK:
                    return _in_order(found, from_newest)
                position = rows[-1][-1]

    def running_generation(self, conversation_id: str) -> Generation | None:
        with self._db.reading() as db:
            row = db.one("SELECT id, conversation_id, text, done, result FROM generations "
                         "WHERE conversation_id = ? AND done = ? ORDER BY updated_at DESC "
                         "LIMIT 1", (conversation_id, False))
        if row is None:
            return None
        return Generation(row[0], row[1], row[2], bool(row[3]),
                          None if row[4] is None else json.loads(row[4]))


def _in_order(calls: list[ModelCall], reversed_: bool) -> list[ModelCall]:
    return calls[::-1] if reversed_ else calls
