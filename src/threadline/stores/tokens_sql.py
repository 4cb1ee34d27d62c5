"""Bearer tokens over SQL, shared by the SQLite and PostgreSQL stores: the
:class:`~threadline.stores.tokens.TokenBackend` in the ``api_tokens`` table of the ``*_access``
migrations."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from threadline.items import format_time
from threadline.stores.rows import stored_time
from threadline.stores.sessions import Database, Session
from threadline.stores.tokens import ApiToken, TokenRole, UnknownToken

_COLUMNS = "id, role, user_id, name, created_at, revoked_at"


class SQLTokens:
    def __init__(self, db: Database, *, in_place: bool = False) -> None:
        self._db = db
        self.in_place = in_place

    def add(self, token: ApiToken, secret_hash: str) -> None:
        revoked = None if token.revoked_at is None else format_time(token.revoked_at)
        with self._db.transaction() as db:
            db.run(f"INSERT INTO api_tokens (secret_hash, {_COLUMNS}) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (secret_hash, token.id, str(token.role), token.user_id, token.name,
                    format_time(token.created_at), revoked))

    def get(self, token_id: str) -> ApiToken:
        with self._db.reading() as db:
            return _get(db, token_id)

    def find(self, secret_hash: str) -> ApiToken | None:
        with self._db.reading() as db:
            row = db.one(f"SELECT {_COLUMNS} FROM api_tokens WHERE secret_hash = ?",
                         (secret_hash,))
        return None if row is None else _token(row)

    def tokens(self) -> list[ApiToken]:
        with self._db.reading() as db:
            rows = db.all(f"SELECT {_COLUMNS} FROM api_tokens ORDER BY created_at, id")
        return [_token(row) for row in rows]

    def revoke(self, token_id: str, at: datetime) -> ApiToken:
        with self._db.transaction() as db:
            db.run("UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                   (format_time(at), token_id))
            return _get(db, token_id)  # raising here rolls back: nothing was there to change

    def any_active(self) -> bool:
        with self._db.reading() as db:
            return db.one("SELECT 1 FROM api_tokens WHERE revoked_at IS NULL LIMIT 1") \
                is not None


def _get(db: Session, token_id: str) -> ApiToken:
    row = db.one(f"SELECT {_COLUMNS} FROM api_tokens WHERE id = ?", (token_id,))
    if row is None:
        raise UnknownToken(token_id)
    return _token(row)


def _token(row: Sequence[Any]) -> ApiToken:
    return ApiToken(row[0], TokenRole(row[1]), row[2], row[3], stored_time(row[4]),
                    None if row[5] is None else stored_time(row[5]))
