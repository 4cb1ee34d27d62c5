"""The AuditBackend protocol: what an audit export reads from the log, by time.

The Store protocol reads by conversation; an export reads by UTC day, so it needs to find the
conversations active in a window without opening every conversation, every item of one
conversation (all branches) in one read, and the exact requests of chosen calls without
decoding each call's delta chain from its root again (``stores/delta.py``).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Protocol

from threadline.calls import SentRequest
from threadline.items import Item


class AuditBackend(Protocol):
    def first_activity(self, start: datetime, end: datetime) -> datetime | None:
        """The earliest item or call time in [start, end), or None when there is none."""
        ...

    def active(self, start: datetime, end: datetime) -> list[str]:
        """Ids of the conversations with an item or a call in [start, end), sorted."""
        ...

    def items(self, conversation_id: str) -> list[Item]:
        """Every item of the conversation, on every branch, by seq."""
        ...

    def requests(self, conversation_id: str, call_ids: Collection[str]
                 ) -> dict[str, SentRequest]:
        """The exact request of each of ``call_ids`` (calls of this conversation), by id."""
        ...
