"""What a running turn keeps beside the log, over SQL: its conversation's lease (one turn at a
time, with an expiry and a cancel flag) and its streamed generation (so a dropped stream can be
resumed). Written once for both databases, like the log in ``stores/relational.py``, which
takes the lease inside a turn's first commit and gives it back inside its last."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar

from threadline.errors import UnknownConversation
from threadline.items import canonical_json, format_time
from threadline.stores.base import Generation, Lease
from threadline.stores.sessions import Session


class TurnStateSQL:
    """Leases and generations; the class it is mixed into opens the transactions."""

    INTEGRITY_ERRORS: ClassVar[tuple[type[Exception], ...]]

    def _transaction(self) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    # -- generations -----------------------------------------------------------------------

    def save_generation(self, generation: Generation, at: datetime) -> None:
        result = None if generation.result is None else canonical_json(dict(generation.result))
        with self._transaction() as db:
            try:
                db.run("INSERT INTO generations (id, conversation_id, text, done, result, "
                       "updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE "
                       "SET text = excluded.text, done = excluded.done, "
                       "result = excluded.result, updated_at = excluded.updated_at",
                       (generation.id, generation.conversation_id, generation.text,
                        generation.done, result, format_time(at)))
            except self.INTEGRITY_ERRORS as err:
                raise UnknownConversation(generation.conversation_id) from err

    def generation(self, generation_id: str) -> Generation | None:
        rows = self._read("SELECT id, conversation_id, text, done, result FROM generations "
                          "WHERE id = ?", (generation_id,))
        if not rows:
            return None
        row = rows[0]
        return Generation(row[0], row[1], row[2], bool(row[3]),
                          None if row[4] is None else json.loads(row[4]))

    # -- leases ----------------------------------------------------------------------------

    def lease(self, conversation_id: str, holder: str, ttl_s: float, now: float) -> Lease:
        with self._transaction() as db:
            return self._take_lease(db, conversation_id, holder, ttl_s, now)

    def _take_lease(self, db: Session, conversation_id: str, holder: str, ttl_s: float,
                    now: float) -> Lease:
        # one statement: it takes a free or expired lease, renews the holder's own, and
        # leaves another holder's live lease alone, with no window between check and write
        try:
            row = db.one(
                "INSERT INTO leases AS l (conversation_id, holder, expires_at, cancel) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE SET "
                "holder = excluded.holder, expires_at = excluded.expires_at, "
                "cancel = CASE WHEN l.holder = excluded.holder THEN l.cancel "
                "ELSE excluded.cancel END "
                "WHERE l.holder = excluded.holder OR l.expires_at <= ? "
                "RETURNING cancel",
                (conversation_id, holder, now + ttl_s, False, now))
        except self.INTEGRITY_ERRORS as err:
            raise UnknownConversation(conversation_id) from err
        if row is not None:
            return Lease(True, holder, now + ttl_s, bool(row[0]))
        held = db.one("SELECT holder, expires_at, cancel FROM leases WHERE "
                      "conversation_id = ?", (conversation_id,))
        return Lease(False, held[0], held[1], bool(held[2]))

    def renew_lease(self, conversation_id: str, holder: str, ttl_s: float, now: float) -> Lease:
        with self._transaction() as db:
            row = db.one("UPDATE leases SET expires_at = ? WHERE conversation_id = ? AND "
                         "holder = ? RETURNING cancel", (now + ttl_s, conversation_id, holder))
        if row is None:
            return Lease(False, holder, now)
        return Lease(True, holder, now + ttl_s, bool(row[0]))

    def lease_holder(self, conversation_id: str, now: float) -> Lease | None:
        rows = self._read("SELECT holder, expires_at, cancel FROM leases WHERE "
                          "conversation_id = ? AND expires_at > ?", (conversation_id, now))
        return None if not rows else Lease(False, rows[0][0], rows[0][1], bool(rows[0][2]))

    def release_lease(self, conversation_id: str, holder: str) -> None:
        with self._transaction() as db:
            db.run("DELETE FROM leases WHERE conversation_id = ? AND holder = ?",
                   (conversation_id, holder))

    def request_cancel(self, conversation_id: str, now: float) -> bool:
        with self._transaction() as db:
            return db.run("UPDATE leases SET cancel = ? WHERE conversation_id = ? AND "
                          "expires_at > ?", (True, conversation_id, now)) > 0
