"""The observer: the seam for what the engine reports beside the turns it commits.

Turn hooks (``turn/hooks.py``) see each committed turn whole. Some of what telemetry counts
never becomes a committed turn, or happens inside one where no hook can see it: a turn that
waited for the conversation's lease, was refused it or asked another to stop, a compaction
applied before a call, and every error a turn raised (a refused turn writes nothing). The
engine reports those to one observer (``metrics/`` implements it). Like a hook, an observer
never fails a turn: ``guarded`` logs what it raises and carries on.
"""

from __future__ import annotations

import logging
from typing import Protocol

from threadline.items import Item

log = logging.getLogger("threadline.observe")


class Observer(Protocol):
    def lease_waited(self, seconds: float) -> None:
        """A turn found the lease held, waited ``seconds``, and got it."""
        ...

    def lease_refused(self, reason: str) -> None:
        """A turn was refused the lease: ``busy`` (its policy was reject) or ``timeout``
        (it waited past ``wait_s``)."""
        ...

    def cancel_requested(self) -> None:
        """A turn asked the one holding the lease to stop (its policy was cancel)."""
        ...

    def compacted(self, item: Item) -> None:
        """A compaction was applied on its own before a call: its item."""
        ...

    def turn_raised(self, error: BaseException) -> None:
        """``run_turn`` or ``answer`` raised ``error`` (refused, cancelled or failed)."""
        ...


class Quiet:
    """The observer of an engine that was given none."""

    def lease_waited(self, seconds: float) -> None:
        pass

    def lease_refused(self, reason: str) -> None:
        pass

    def cancel_requested(self) -> None:
        pass

    def compacted(self, item: Item) -> None:
        pass

    def turn_raised(self, error: BaseException) -> None:
        pass


QUIET = Quiet()


class Guarded:
    """An observer whose failures are logged, never raised into the turn."""

    def __init__(self, inner: Observer) -> None:
        self.inner = inner

    def lease_waited(self, seconds: float) -> None:
        try:
            self.inner.lease_waited(seconds)
        except Exception:  # noqa: BLE001 - telemetry never fails a turn
            log.exception("observer failed on lease_waited")

    def lease_refused(self, reason: str) -> None:
        try:
            self.inner.lease_refused(reason)
        except Exception:  # noqa: BLE001
            log.exception("observer failed on lease_refused")

    def cancel_requested(self) -> None:
        try:
            self.inner.cancel_requested()
        except Exception:  # noqa: BLE001
            log.exception("observer failed on cancel_requested")

    def compacted(self, item: Item) -> None:
        try:
            self.inner.compacted(item)
        except Exception:  # noqa: BLE001
            log.exception("observer failed on compacted")

    def turn_raised(self, error: BaseException) -> None:
        try:
            self.inner.turn_raised(error)
        except Exception:  # noqa: BLE001
            log.exception("observer failed on turn_raised")


def guarded(observer: Observer | None) -> Observer:
    """What the engine calls: ``observer`` guarded, or the quiet one."""
    return QUIET if observer is None else Guarded(observer)
