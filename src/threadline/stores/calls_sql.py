"""The log's model-call records over SQL, mixed into ``stores/relational.py``'s store: each
call is inserted with its exact request stored as a delta against an earlier call's
(``stores/delta.py``), and read back with the request rebuilt from its chain. The newest
request of each recently used branch is kept, so the next call on it is encoded without
decoding the chain."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, ClassVar

from threadline.calls import ModelCall, SentRequest
from threadline.errors import UnknownCall
from threadline.items import Conversation, canonical_json, format_time
from threadline.stores import delta
from threadline.stores.rows import CALL_COLUMNS, call_from_row, request_size
from threadline.stores.sessions import Session

REMEMBERED_BRANCHES = 32
REMEMBERED_BYTES = 64 * 2**20  # roughly: a few very long conversations, many short ones


class CallsSQL:
    """Model calls; the class it is mixed into opens the sessions and orders the calls."""

    CALL_ORDER: ClassVar[str]  # the column that orders calls as they were recorded
    _cache_lock: threading.Lock
    # the newest full request per (conversation, branch), by the call that sent it
    _requests: OrderedDict[tuple[str, str], tuple[str, SentRequest]]

    def _reading(self) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def conversation(self, conversation_id: str, *, as_read: bool = False) -> Conversation:
        raise NotImplementedError

    def _insert_call(self, db: Session, call: ModelCall, reply_seq: int | None) -> ModelCall:
        assert call.request is not None, "a recorded call carries its request"
        # any earlier call of the conversation is a correct base; the newest one on the branch
        # that succeeded is usually the best (a failed one may hold only its messages, and the
        # retry's prompt would be stored whole), and this handle usually still holds it
        remembered = self._requests.get((call.conversation_id, call.branch))
        base_id: str | None
        base: SentRequest | None
        if remembered is not None:
            base_id, base = remembered
        else:
            base_id = self._base_call(db, call.conversation_id, call.branch)
            base = None if base_id is None else self._request(db, base_id)
        encoded = delta.encode(call.request, base)
        if base is not None and not any(isinstance(encoded[f], dict) and encoded[f]["keep"]
                                        for f in ("messages", "prompt", "tokens")):
            base_id = None  # nothing shared: store it whole, with no chain behind it
        db.run(
            "INSERT INTO model_calls (id, conversation_id, branch, turn, head_seq, reply_seq, "
            "status, model, base_call_id, request_delta, response, prompt_tokens, cached_tokens,"
            " completion_tokens, ttft_ms, total_ms, error, started_at, prefix_report, purpose) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (call.id, call.conversation_id, call.branch, call.turn, call.head_seq, reply_seq,
             str(call.status), call.model, base_id, canonical_json(encoded),
             canonical_json(dict(call.response)), call.usage.prompt_tokens,
             call.usage.cached_tokens, call.usage.completion_tokens, call.timings.ttft_ms,
             call.timings.total_ms, call.error, format_time(call.started_at),
             None if call.prefix is None else canonical_json(dict(call.prefix)), call.purpose))
        return replace(call, reply_seq=reply_seq)

    def _base_call(self, db: Session, conversation_id: str, branch: str) -> str | None:
        """The call a new request is stored against: the branch's last that succeeded, else
        the conversation's (a fork's first call usually shares its parent's prefix)."""
        row = db.one(f"SELECT id FROM model_calls WHERE conversation_id = ? AND branch = ? "
                     f"AND purpose = 'turn' AND status = 'ok' "
                     f"ORDER BY {self.CALL_ORDER} DESC LIMIT 1", (conversation_id, branch))
        if row is None:
            row = db.one(f"SELECT id FROM model_calls WHERE conversation_id = ? "
                         f"AND status = 'ok' ORDER BY {self.CALL_ORDER} DESC LIMIT 1",
                         (conversation_id,))
        return None if row is None else str(row[0])

    def _request(self, db: Session, call_id: str) -> SentRequest:
        with self._cache_lock:
            for cached_id, request in self._requests.values():
                if cached_id == call_id:
                    return request
        rows = db.all(
            "WITH RECURSIVE chain (id, base, delta) AS ("
            " SELECT id, base_call_id, request_delta FROM model_calls WHERE id = ?"
            " UNION ALL SELECT m.id, m.base_call_id, m.request_delta"
            " FROM model_calls m JOIN chain ON m.id = chain.base)"
            " SELECT delta FROM chain", (call_id,))
        if not rows:
            raise UnknownCall(call_id)
        return delta.decode([json.loads(row[0]) for row in rows])

    def _remember(self, call: ModelCall, request: SentRequest) -> None:
        """Keep the newest request of each recently used branch: the next call on that branch
        is encoded against it without decoding the chain."""
        key = (call.conversation_id, call.branch)
        with self._cache_lock:
            self._requests[key] = (call.id, request)
            self._requests.move_to_end(key)
            while len(self._requests) > 1 and (
                    len(self._requests) > REMEMBERED_BRANCHES
                    or sum(request_size(r) for _, r in self._requests.values())
                    > REMEMBERED_BYTES):
                self._requests.popitem(last=False)

    # -- reads ---------------------------------------------------------------------------

    def call(self, call_id: str) -> ModelCall:
        with self._reading() as db:
            row = db.one(f"SELECT {CALL_COLUMNS} FROM model_calls WHERE id = ?", (call_id,))
            if row is None:
                raise UnknownCall(call_id)
            return call_from_row(row, self._request(db, call_id))

    def last_call(self, conversation_id: str, branch: str | None = None) -> ModelCall | None:
        sql = f"SELECT {CALL_COLUMNS} FROM model_calls WHERE conversation_id = ? " \
            "AND purpose = 'turn'"
        params: list[Any] = [conversation_id]
        if branch is not None:
            sql += " AND branch = ?"
            params.append(branch)
        with self._reading() as db:
            row = db.one(sql + f" ORDER BY {self.CALL_ORDER} DESC LIMIT 1", params)
            return None if row is None else call_from_row(row, self._request(db, row[0]))

    def calls(self, conversation_id: str, *, branch: str | None = None) -> list[ModelCall]:
        self.conversation(conversation_id)
        sql = f"SELECT {CALL_COLUMNS} FROM model_calls WHERE conversation_id = ?"
        params: list[Any] = [conversation_id]
        if branch is not None:
            sql += " AND branch = ?"
            params.append(branch)
        return [call_from_row(row, None) for row in self._read(sql + f" ORDER BY {self.CALL_ORDER}",
                                                       params)]
