"""The per-conversation lease: one turn at a time, across threads, processes and replicas.

A turn takes the conversation's lease before its message is appended and gives it back after
the reply is committed. While the turn runs, a heartbeat thread renews the lease every
``heartbeat_s`` (also through a long prefill, when no token arrives to mark progress) and
notices a cancel request; if the process dies, the heartbeat stops and the lease expires after
``ttl_s``, so a crashed holder never wedges a conversation for longer than that. A message
that arrives while another turn holds the lease follows the sender's policy:

    queue   (default) wait for the lease, then append after the running turn's reply
    reject  refuse at once: :class:`TurnInProgress` (HTTP 409 with Retry-After); nothing written
    cancel  ask the running turn to stop (it checks between streamed pieces and before each
            side-effecting tool call, and is recorded as cancelled), then go next, answering
            with the interrupted message in the history; a turn that has run a side-effecting
            tool is no longer cancelled, and the new message waits for it as with queue
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from threadline.errors import TurnCancelled, TurnInProgress
from threadline.items import new_id
from threadline.stores.base import Store

BUSY_POLICIES = ("queue", "reject", "cancel")


@dataclass(frozen=True)
class LeasePolicy:
    on_busy: str = "queue"
    ttl_s: float = 10.0        # a crashed holder frees the conversation after this long
    wait_s: float = 300.0      # how long "queue" and "cancel" wait before giving up
    heartbeat_s: float = 0.25  # how often a running turn renews and looks for a cancel

    def __post_init__(self) -> None:
        if self.on_busy not in BUSY_POLICIES:
            raise ValueError(f"unknown busy policy {self.on_busy!r}; choose from "
                             f"{', '.join(BUSY_POLICIES)}")
        if not 0 < self.heartbeat_s < self.ttl_s:
            raise ValueError("the heartbeat must be shorter than the lease's time to live")


DEFAULT_LEASE = LeasePolicy()


class Holding:
    """A held lease, kept alive by a heartbeat thread; ``check`` (called between streamed
    pieces) stops the turn if a newer message asked it to, or if the lease was lost."""

    def __init__(self, store: Store, conversation_id: str, holder: str, policy: LeasePolicy,
                 clock: Callable[[], float]) -> None:
        self.store, self.conversation_id, self.holder = store, conversation_id, holder
        self.policy, self.clock = policy, clock
        self.stopped = False  # a cancel was asked for, or the lease was lost
        self.lost = False
        self.protected = False  # a side effect happened: a cancel no longer stops the turn
        self._done = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)
        self._beat.start()

    def check(self) -> None:
        if self.lost or (self.stopped and not self.protected):
            raise TurnCancelled(self.conversation_id)

    def protect(self) -> None:
        """From now on the turn finishes even if a newer message asks it to stop: it has
        started changing the world, and a half-done turn would hide what it changed. A cancel
        asked for before this still stops it here."""
        self.check()
        self.protected = True

    def _heartbeat(self) -> None:
        while not self._done.wait(self.policy.heartbeat_s):
            try:
                lease = self.store.lease(self.conversation_id, self.holder, self.policy.ttl_s,
                                         self.clock())
            except Exception:  # noqa: BLE001 - a closed store: the turn is ending anyway
                return
            if not lease.granted:
                self.lost = self.stopped = True
            elif lease.cancel_requested:
                self.stopped = True

    def end(self) -> None:
        self._done.set()
        self._beat.join()


@contextmanager
def hold(store: Store, conversation_id: str, policy: LeasePolicy, *,
         clock: Callable[[], float] = time.time,
         sleep: Callable[[float], None] = time.sleep) -> Iterator[Holding]:
    holder = new_id("lease_")
    started = clock()
    asked = False
    pause = 0.02
    while True:
        now = clock()
        lease = store.lease(conversation_id, holder, policy.ttl_s, now)
        if lease.granted:
            break
        retry_after = max(1.0, lease.expires_at - now)
        if policy.on_busy == "reject":
            raise TurnInProgress(conversation_id, retry_after)
        if policy.on_busy == "cancel" and not asked:
            asked = store.request_cancel(conversation_id, now)
        if now - started > policy.wait_s:
            raise TurnInProgress(conversation_id, retry_after, waited=True)
        sleep(pause)
        pause = min(pause * 2, 0.5)
    holding = Holding(store, conversation_id, holder, policy, clock)
    try:
        yield holding
    finally:
        holding.end()
        store.release_lease(conversation_id, holder)


def watched(on_text: Callable[[str], None] | None, holding: Holding) -> Callable[[str], None]:
    """``on_text`` that also keeps the lease and stops when a newer message cancels."""
    def each(piece: str) -> None:
        holding.check()
        if on_text is not None:
            on_text(piece)
    return each
