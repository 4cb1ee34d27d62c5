"""The current time, for turns that need it: recorded when the turn starts, shown in its tail.

A clock in the system prompt changes the first bytes of every request and no prefix is ever
reused; in the tail it changes only what is new anyway. Recorded as an item, the time the
model was shown is part of the log, so the request can be rebuilt exactly later.
"""

from __future__ import annotations

from collections.abc import Sequence

from threadline.items import Item, NewItem, format_time
from threadline.request import TailBlock
from threadline.turn.providers import Gathering, Provider, this_turn


class TimeProvider(Provider):
    name = "time"

    def gather(self, found: Gathering) -> NewItem | None:
        return self.context_item(text=format_time(found.host.clock()))

    def render(self, history: Sequence[Item]) -> list[TailBlock]:
        item = this_turn(self, history)
        return [] if item is None else [TailBlock("current time", item.content["text"])]
