"""The context providers behind the arms: what each intervention shows in the tail of a turn.

Each is an ordinary context provider (``turn/providers.py``): it records what it found for a
turn as one item after the user message, and renders only what was recorded, so every call's
request stays a function of the log and a re-score needs none of them. Everything they show
goes in the tail, below every cache breakpoint: the system prompt and the history above it
stay byte for byte what plain SHARDED sends, so the prefix cache keeps covering them.

    Requirements  the working state (``compaction/working_state.py``) kept from the user's
                  turns: the first message as the goal, each later one, verbatim, as a fact
                  whose source is its turn; the whole list shown every turn
    Recap         on the conversation's last turn, everything the user said before it
    Goal          every N turns, the goal (the user's first message) restated: the
                  production reminder (``providers/goal.py``) under the arm's label

A turn's index is counted from the user messages in the log, not the view, so a compaction
never shifts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from threadline.compaction.working_state import (
    MAX_ENTRIES,
    MAX_TEXT,
    state_item,
    state_of,
    update,
)
from threadline.items import Item, NewItem
from threadline.providers.goal import GoalReminder, user_turns
from threadline.providers.working_state import WorkingStateProvider
from threadline.request import TailBlock
from threadline.turn.providers import Gathering, Provider, this_turn

said_before = user_turns  # what the user said before the turn being gathered, oldest first


class Requirements(WorkingStateProvider):
    """The working state as a requirements list, updated from each user message (it renders
    as ``WorkingStateProvider`` does: the newest state, every turn)."""

    def gather(self, found: Gathering) -> NewItem | None:
        text = found.text.strip()[:MAX_TEXT]
        if not text:
            return None
        state = state_of(found.history)
        if len(state.facts) >= MAX_ENTRIES:
            return None  # the list is full; the state as it was stays in the tail
        turn = len(said_before(found.history)) + 1
        change = {"goal": text} if not state.goal else {
            "add_facts": [{"fact": text, "source": f"the user, turn {turn}"}]}
        return state_item(update(state, change))


class Recap(Provider):
    """Before the last of ``turns`` user turns, a recap of every earlier one."""

    name = "recap"
    label = "recap: everything the user has said so far"

    def __init__(self, turns: int) -> None:
        self.turns = turns

    def gather(self, found: Gathering) -> NewItem | None:
        before = said_before(found.history)
        if len(before) + 1 != self.turns or not before:
            return None
        return self.context_item(text="\n".join(f"- {text}" for text in before))

    def render(self, history: Sequence[Item]) -> list[TailBlock]:
        item = this_turn(self, history)
        return [] if item is None else [TailBlock(self.label, item.content["text"])]


class Goal(GoalReminder):
    """The goal (the user's first message) restated on turns 1 + N, 1 + 2N, …: the production
    reminder (``providers/goal.py``) under the arm's name and label, in its own turn's tail
    only (``kept=False``), like the other tail arms, so the arms compare alike and runs
    recorded before kept reminders replay the same."""

    label = "the task's goal, restated"

    def __init__(self, every: int) -> None:
        super().__init__(every, name="goal", goal_label=self.label, kept=False)
