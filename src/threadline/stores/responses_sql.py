"""Response records over SQL, shared by the SQLite and PostgreSQL stores (the table of the
migrations ``*_responses``), like the log in ``stores/relational.py``."""

from __future__ import annotations

from datetime import datetime

from threadline.errors import UnknownConversation
from threadline.items import canonical_json, format_time
from threadline.stores.responses import (
    RECORD_COLUMNS,
    ResponseRecord,
    UnknownResponse,
    record_from_row,
)
from threadline.stores.sessions import Database

_COLUMNS = ", ".join(RECORD_COLUMNS)


class SQLResponses:
    def __init__(self, db: Database) -> None:
        self._db = db

    def save(self, record: ResponseRecord) -> ResponseRecord:
        with self._db.transaction() as db:
            try:
                # a message has one response: a retried request's insert does nothing
                db.run(f"INSERT INTO responses ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                       "ON CONFLICT DO NOTHING",
                       (record.id, record.conversation_id, record.branch, record.message_seq,
                        record.reply_seq, record.call_id, format_time(record.created_at),
                        record.previous_response_id, record.instructions,
                        canonical_json(dict(record.metadata)), None))
            except self._db.integrity_errors as err:
                raise UnknownConversation(record.conversation_id) from err
            row = db.one(f"SELECT {_COLUMNS} FROM responses WHERE conversation_id = ? AND "
                         "message_seq = ?", (record.conversation_id, record.message_seq))
        return record_from_row(row)

    def get(self, response_id: str) -> ResponseRecord:
        with self._db.reading() as db:
            row = db.one(f"SELECT {_COLUMNS} FROM responses WHERE id = ?", (response_id,))
        if row is None:
            raise UnknownResponse(response_id)
        found = record_from_row(row)
        if found.deleted_at is not None:
            raise UnknownResponse(response_id, deleted=True)
        return found

    def for_message(self, conversation_id: str, message_seq: int) -> ResponseRecord | None:
        with self._db.reading() as db:
            row = db.one(f"SELECT {_COLUMNS} FROM responses WHERE conversation_id = ? AND "
                         "message_seq = ?", (conversation_id, message_seq))
        return None if row is None else record_from_row(row)

    def delete(self, response_id: str, at: datetime) -> None:
        with self._db.transaction() as db:
            if db.run("UPDATE responses SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
                      (format_time(at), response_id)) == 0:
                deleted = db.one("SELECT 1 FROM responses WHERE id = ?", (response_id,))
                raise UnknownResponse(response_id, deleted=deleted is not None)
