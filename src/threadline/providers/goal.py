"""Reminders at the tail: the conversation's goal and the system prompt's policy, restated.

Over a long conversation the first message (what the user set out to do) and the system
prompt drift out of the model's attention, and an attack that escalates across turns counts
on it. Restating them periodically is cheap where it goes just above the current turn's
message: below every cache breakpoint, so the cacheable prefix never moves. By default the
reminder is then kept where it was shown (``kept``: the assembler shows it in place for the
rest of the conversation), so the next request begins with the whole previous one; with
``kept=False`` it is a tail block of its own turn only, and the next request re-sends the
message that followed it.

A reminder is shown on turns 1 + N, 1 + 2N, … (``every``: N), and on any turn it is asked
for, which is the hook a trajectory monitor uses:

- ``Remind(reason)``: a per-turn option, from the caller;
- ``ask(found, reason)``: from a context provider registered before this one, while the turn
  gathers (``Gathering.shared``);
- ``request_reminder(store, …)``: a note recorded in the log (by a turn hook, after a turn),
  which asks for one on the branch's next turn.

What was shown is recorded as one item after the user message (the text, the turn, and why:
the schedule and every request with its reason), so the exact request stays a function of
the log. A turn's index is counted from the user messages in the log, not the view, so a
compaction never shifts the schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from threadline.errors import InputError
from threadline.items import Item, ItemKind, NewItem, utc_now
from threadline.request import TailBlock
from threadline.settings import REMIND
from threadline.stores.base import MAIN, Store, append
from threadline.turn.providers import Gathering, Provider, this_turn

WHAT = REMIND  # what a reminder restates
GOAL_LABEL = "the conversation's goal, restated"
POLICY_LABEL = "the system prompt's policy, restated"
_ASKED = "reminder requested"   # Gathering.shared: the reasons providers asked for one
_REQUEST = "reminder_request"   # a note's field: the reason recorded for the next turn


@dataclass(frozen=True)
class Remind:
    """A turn option: restate the goal (and/or policy) on this turn, saying why."""

    reason: str = "asked for"


def ask(found: Gathering, reason: str) -> None:
    """Ask for a reminder on the turn ``found`` gathers (from a provider that runs first)."""
    found.shared.setdefault(_ASKED, []).append(reason)


def request_reminder(store: Store, conversation_id: str, reason: str, branch: str = MAIN, *,
                     clock: Callable[[], datetime] = utc_now) -> Item:
    """Record a request for a reminder on the branch's next turn (from a turn hook: a
    monitor that judged the turn just committed)."""
    if not reason.strip():
        raise InputError("a reminder request needs a reason")
    return append(store, conversation_id, branch, clock(),
                  NewItem.note(f"reminder requested: {reason.strip()}",
                               **{_REQUEST: reason.strip()}))[0]


def user_turns(history: Sequence[Item]) -> list[str]:
    """What the user said on the branch, oldest first (empty messages included, so the
    count is the turn's index less one)."""
    return [item.content["text"] for item in history if item.kind is ItemKind.USER]


def requested(history: Sequence[Item]) -> list[str]:
    """The reasons recorded since the branch's last user message for a reminder next turn."""
    reasons: list[str] = []
    for item in reversed(history):
        if item.kind is ItemKind.USER:
            break
        if item.kind is ItemKind.NOTE and _REQUEST in item.content:
            reasons.append(str(item.content[_REQUEST]))
    return reasons[::-1]


class GoalReminder(Provider):
    """Restate ``what`` ("goal": the first user message; "policy": the conversation's system
    prompt; "both") every ``every`` turns (None: only when asked)."""

    options: tuple[type, ...] = (Remind,)

    def __init__(self, every: int | None = None, *, what: str = "goal",
                 name: str = "goal reminder", goal_label: str = GOAL_LABEL,
                 policy_label: str = POLICY_LABEL, kept: bool = True) -> None:
        if every is not None and (isinstance(every, bool) or every < 1):
            raise InputError(f"a reminder's interval must be a positive number of turns; "
                             f"got {every!r}")
        if what not in WHAT:
            raise InputError(f"a reminder restates one of: {', '.join(WHAT)}; got {what!r}")
        self.every, self.what, self.name = every, what, name
        self.goal_label, self.policy_label = goal_label, policy_label
        self.kept = kept  # shown in place after its turn, so the next request repeats it

    def gather(self, found: Gathering) -> NewItem | None:
        before = user_turns(found.history)
        why = [f"asked: {r}" for r in (*requested(found.history), *found.shared.get(_ASKED, ()))]
        option = found.turn.option(Remind)
        if option is not None:
            why.append(f"asked: {option.reason}")
        if self.every is not None and before and len(before) % self.every == 0:
            why.insert(0, f"every {self.every} turns")
        if not why:
            return None
        content: dict[str, object] = {"turn": len(before) + 1, "why": why}
        if self.what in ("goal", "both"):
            goal = next((text for text in before if text.strip()), None)
            if goal is not None:  # on the first turn, the message is the goal itself
                content["text"] = goal
        if self.what in ("policy", "both"):
            policy = self._system(found)
            if policy:
                content["policy"] = policy
        if "text" not in content and "policy" not in content:
            return None  # nothing to restate yet
        if self.kept:  # the assembler shows it, in place, from now on (turn/assemble.py)
            content["kept"] = [[b.label, b.text] for b in self._blocks(content)]
        return self.context_item(**content)

    def render(self, history: Sequence[Item]) -> list[TailBlock]:
        item = this_turn(self, history)
        if item is None or "kept" in item.content:
            return []
        return self._blocks(item.content)

    def _blocks(self, content: Mapping[str, object]) -> list[TailBlock]:
        blocks = []
        if "text" in content:
            blocks.append(TailBlock(self.goal_label, str(content["text"])))
        if "policy" in content:
            blocks.append(TailBlock(self.policy_label, str(content["policy"])))
        return blocks

    @staticmethod
    def _system(found: Gathering) -> str | None:
        """The system prompt the turn is answered under: the conversation's, or for a new
        one the engine's default."""
        cid = found.turn.conversation_id
        if cid is not None:
            return found.host.store.conversation(cid).system
        system = getattr(found.host, "system", None)
        return system if isinstance(system, str) else None
