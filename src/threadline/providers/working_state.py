"""The task's working state in the tail of every turn: goal, plan, decisions, facts, open
questions (``compaction/working_state.py``). It is recorded when it changes, not per turn, so
this provider only renders it."""

from __future__ import annotations

from collections.abc import Sequence

from threadline.compaction.working_state import state_of
from threadline.items import Item, ItemKind
from threadline.request import TailBlock
from threadline.turn.providers import Provider


class WorkingStateProvider(Provider):
    name = "working state"
    kind = ItemKind.WORKING_STATE

    def render(self, history: Sequence[Item]) -> list[TailBlock]:
        state = state_of(history)
        return [] if state.empty else [TailBlock("working state", state.render())]
