"""Turn hooks: the seam for work that follows a committed turn.

The memory writer's queue is a hook (``threadline/hooks/``); telemetry and the audit trail
plug in the same way. A hook runs after the turn's last commit (the reply is durable, and the
lease was given back in that commit), before ``run_turn`` returns: it sees what
the turn committed (its items, every model call's record with its prefix report) and cannot
change it. A hook that raises never fails the turn: the failure is recorded as a note on the
branch (kept out of the model's context) and logged, and the turn returns as it would have.
A hook with slow work should hand it to a queue or a background exporter, as the memory
writer's queue does (the writer learns later, in ``threadline memory learn``).

Hooks also run after a turn that failed once its message was written (``event.error`` says
why, ``event.result`` is None), so what follows a turn sees the failures too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from threadline.cache.prefix import PrefixReport
from threadline.calls import ModelCall
from threadline.items import Item, ItemKind, NewItem
from threadline.stores.base import Commit, Store
from threadline.turn.input import TurnInput
from threadline.turn.result import TurnResult

log = logging.getLogger("threadline.hooks")


class TurnEvent:
    """A turn as committed: its input, its message, every model call it made (in order), and
    its result, or the error that ended it; ``elapsed_s``: how long the turn took, from the
    call that began it (waiting for the lease included) to its hooks."""

    def __init__(self, store: Store, turn: TurnInput, message: Item, *,
                 calls: Sequence[ModelCall], result: TurnResult | None = None,
                 error: BaseException | None = None, elapsed_s: float | None = None) -> None:
        self.store, self.turn, self.message = store, turn, message
        self.calls = tuple(calls)
        self.result, self.error = result, error
        self.elapsed_s = elapsed_s
        self._items: tuple[Item, ...] | None = None

    @property
    def conversation_id(self) -> str:
        return self.message.conversation_id

    @property
    def branch(self) -> str:
        return self.result.branch if self.result is not None else self.turn.branch

    @property
    def items(self) -> tuple[Item, ...]:
        """The turn's items on its branch, from its message to its reply (its context, tool
        calls and results) or, for a failed turn, to the last item its calls were shown,
        then what hooks before the first to ask added to the turn (the monitor's decision
        once it has read the reply); read from the store the first time a hook asks."""
        if self._items is None:
            last = self.result.reply.seq if self.result is not None else max(
                [self.message.seq, *(c.head_seq for c in self.calls)])
            history = self.store.history(self.conversation_id, self.branch)
            start = next(i for i in range(len(history) - 1, -1, -1)
                         if history[i].seq == self.message.seq)
            turn = self.message.turn
            self._items = tuple(i for i in history[start:]
                                if i.seq <= last or i.turn == turn)
        return self._items

    @property
    def prefix(self) -> PrefixReport | None:
        """The prefix report of the turn's last call (how much of the request was reused)."""
        last = self.calls[-1] if self.calls else None
        return None if last is None or not last.prefix else PrefixReport.from_json(last.prefix)


class TurnHook(Protocol):
    name: str        # names it in the note a failure leaves
    uses_user: bool  # it reads TurnInput.user_id

    def after_turn(self, event: TurnEvent) -> None: ...


def run_hooks(hooks: Sequence[TurnHook], event: TurnEvent, *,
              clock: Callable[[], datetime]) -> None:
    """Run each hook; a failure is noted on the branch and logged, never raised."""
    for hook in hooks:
        try:
            hook.after_turn(event)
        except Exception as err:  # noqa: BLE001 - a hook never fails the turn
            log.exception("turn hook %r failed on %s", hook.name, event.conversation_id)
            _note_failure(event, hook.name, err, clock)


def _note_failure(event: TurnEvent, name: str, err: Exception,
                  clock: Callable[[], datetime]) -> None:
    note = NewItem(ItemKind.NOTE, {"text": f"turn hook {name!r} failed: {err}", "hook": name,
                                   "error": f"{type(err).__name__}: {err}"})
    try:
        event.store.commit(Commit(conversation_id=event.conversation_id, branch=event.branch,
                                  created_at=clock(), check_head=False, items=[note]))
    except Exception:  # noqa: BLE001 - the store itself failing: the log line stands
        log.exception("could not record the failure of turn hook %r", name)
