"""The ResponseBackend protocol: what a Responses API response id names, as a store keeps it.

A response is a point in a branch: the user message a request added and the reply that
answered it, in one conversation. The record keeps that point and what the request said that
the log does not (its ``previous_response_id``, ``instructions`` and ``metadata``), so a
response can be read back, chained from, and deleted. Deleting one leaves a tombstone: the id
stops resolving, and the conversation's items stay, since every response chained after it
has them in its history; deleting the conversation removes its responses with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from threadline.errors import NotFound
from threadline.stores.rows import stored_time


class UnknownResponse(NotFound):
    def __init__(self, response_id: str, *, deleted: bool = False) -> None:
        super().__init__(
            f"response {response_id!r} was deleted" if deleted else
            f"no response with id {response_id!r}",
            hint="a response is kept when it was made with store=true, until it is deleted; "
                 "to start a new conversation, omit previous_response_id")
        self.response_id = response_id


@dataclass(frozen=True)
class ResponseRecord:
    id: str
    conversation_id: str
    branch: str
    message_seq: int      # the user message the request added
    reply_seq: int        # the reply that answered it: where a chained request continues
    call_id: str          # the model call that made the reply
    created_at: datetime
    previous_response_id: str | None = None
    instructions: str | None = None  # as the request gave them (or carried from its chain)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    deleted_at: datetime | None = None


RECORD_COLUMNS = ("id", "conversation_id", "branch", "message_seq", "reply_seq", "call_id",
                  "created_at", "previous_response_id", "instructions", "metadata",
                  "deleted_at")


def record_from_row(row: Sequence[Any]) -> ResponseRecord:
    return ResponseRecord(row[0], row[1], row[2], row[3], row[4], row[5], stored_time(row[6]),
                          row[7], row[8], json.loads(row[9]),
                          None if row[10] is None else stored_time(row[10]))


class ResponseBackend(Protocol):
    def save(self, record: ResponseRecord) -> ResponseRecord:
        """Keep ``record``; if its message already has one (a retried request), keep
        nothing and return that one instead. UnknownConversation if the conversation is
        gone."""
        ...

    def get(self, response_id: str) -> ResponseRecord:
        """The live record; UnknownResponse if there is none or it was deleted."""
        ...

    def for_message(self, conversation_id: str, message_seq: int) -> ResponseRecord | None:
        """The record of the request that added a message, deleted or not."""
        ...

    def delete(self, response_id: str, at: datetime) -> None:
        """Make the id stop resolving (the log is untouched); UnknownResponse if it does
        not resolve now."""
        ...
