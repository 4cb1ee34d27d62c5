"""The compactor: the seam before each model call, where a branch may be compacted.

``compaction.Compaction`` implements it (clear stale tool results, drop old turns, summarise
at a task boundary, each priced first); an engine without one never compacts on its own.
"""

from __future__ import annotations

from typing import Protocol

from threadline.items import Item
from threadline.plugin import Host
from threadline.request import Request


class Compactor(Protocol):
    def before_call(self, host: Host, head: Item, branch: str) -> tuple[Item, Request | None]:
        """Compact ``branch`` (whose newest item is ``head``) if it is time to. Returns the
        branch's head afterwards, and the request to send when measuring it already built it
        (nothing changed since); None makes the engine assemble it."""
        ...
