"""A reminder: a fixed note the model sees at the end of every turn's context, below every
cache breakpoint (a persona to keep, an answer format), where a long history cannot bury it.
Recorded per turn like any provider's finding, so changing the text later never changes what
earlier calls were shown."""

from __future__ import annotations

from collections.abc import Sequence

from threadline.errors import InputError
from threadline.items import Item, NewItem
from threadline.request import TailBlock
from threadline.turn.providers import Gathering, Provider, this_turn


class ReminderProvider(Provider):
    def __init__(self, text: str, *, name: str = "reminder") -> None:
        if not text.strip():
            raise InputError("a reminder needs text")
        self.text, self.name = text.strip(), name

    def gather(self, found: Gathering) -> NewItem | None:
        return self.context_item(text=self.text)

    def render(self, history: Sequence[Item]) -> list[TailBlock]:
        item = this_turn(self, history)
        return [] if item is None else [TailBlock(self.name, item.content["text"])]
