"""The per-conversation lease: one turn at a time, across threads, processes and replicas.

A turn takes the conversation's lease in the commit that appends its message and gives it
back in the commit that appends its reply, so the lease costs no writes of its own: a turn is
two durable writes. If another holder's lease is live when that commit runs, it writes
nothing, and the turn waits (reading, as its policy says, below) and gathers its context
again before it tries once more. A turn that must act before writing its message (tool calls
a crashed turn decided) or writes none (a retry, ``answer``) takes the lease on its own first.
While the turn runs, the process's one heartbeat thread renews the lease every
``heartbeat_s`` (also through a long prefill, when no token arrives to mark progress) and
notices a cancel request; if the process dies, the heartbeat stops and the lease expires
after ``ttl_s``, so a crashed holder never wedges a conversation for longer than that. A
message that arrives while another turn holds the lease follows the sender's policy:

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
from threadline.stores.base import Lease, LeaseClaim, Store
from threadline.turn.observe import QUIET, Observer

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
    """One turn's hold on its conversation's lease. ``claim`` goes in the turn's first commit
    (``took`` then starts the heartbeat), ``giving_back`` in its last (then ``gave_back``);
    ``take`` takes it on its own. ``check`` (called between streamed pieces) stops the turn if
    a newer message asked it to, or if the lease was lost. Waits, refusals and cancel
    requests are reported to ``observer``."""

    def __init__(self, store: Store, conversation_id: str, policy: LeasePolicy,
                 clock: Callable[[], float], sleep: Callable[[float], None],
                 observer: Observer = QUIET) -> None:
        self.store, self.conversation_id, self.holder = store, conversation_id, new_id("lease_")
        self.policy, self.clock, self.sleep = policy, clock, sleep
        self.observer = observer
        self.held = False  # the lease is ours now
        self.stopped = False  # a cancel was asked for, or the lease was lost
        self.lost = False
        self.protected = False  # a side effect happened: a cancel no longer stops the turn
        self._beating = threading.Lock()  # held while a renewal runs: ``_stop`` waits for it
        self._beats = False
        self._started = clock()

    def wait(self) -> None:
        """Return once no other holder's lease is live, reading only; as the policy says,
        refuse, or ask the running turn to stop, while one is."""
        def free(now: float) -> Lease | None:
            lease = self.store.lease_holder(self.conversation_id, now)
            return None if lease is None or lease.holder == self.holder else lease
        self._until(free)

    def claim(self) -> LeaseClaim | None:
        """What the turn's first commit carries to take the lease (None: held already)."""
        return None if self.held else LeaseClaim(self.holder, self.policy.ttl_s, self.clock())

    def took(self) -> None:
        """The commit that carried the claim succeeded: the lease is ours; keep it alive."""
        if not self.held:
            self.held = True
            self._beats = True
            HEARTBEAT.keep(self)

    def take(self) -> None:
        """Take the lease now, in a write of its own, waiting as the policy says."""
        def taken(now: float) -> Lease | None:
            lease = self.store.lease(self.conversation_id, self.holder, self.policy.ttl_s, now)
            if not lease.granted:
                return lease
            self.took()
            return None
        if not self.held:
            self._until(taken)

    def giving_back(self) -> str | None:
        """What the turn's last commit carries to give the lease back (None: not held)."""
        return self.holder if self.held else None

    def gave_back(self) -> None:
        """The commit that carried the release succeeded."""
        self._stop()
        self.held = False

    def check(self) -> None:
        if self.lost or (self.stopped and not self.protected):
            raise TurnCancelled(self.conversation_id)

    def protect(self) -> None:
        """From now on the turn finishes even if a newer message asks it to stop: it has
        started changing the world, and a half-done turn would hide what it changed. A cancel
        asked for before this still stops it here."""
        self.check()
        self.protected = True

    def end(self) -> None:
        """The turn is over: stop the heartbeat, and give back a lease still held."""
        self._stop()
        if self.held:
            self.held = False
            self.store.release_lease(self.conversation_id, self.holder)

    def _until(self, attempt: Callable[[float], Lease | None]) -> None:
        """Call ``attempt`` until it finds no other holder in the way (None), backing off, and
        doing meanwhile what the policy says: refuse, wait (up to ``wait_s``), or ask the
        running turn to stop once."""
        asked, pause, since = False, 0.02, None
        while (busy := attempt(now := self.clock())) is not None:
            retry_after = max(1.0, busy.expires_at - now)
            if self.policy.on_busy == "reject":
                self.observer.lease_refused("busy")
                raise TurnInProgress(self.conversation_id, retry_after)
            if now - self._started > self.policy.wait_s:
                self.observer.lease_refused("timeout")
                raise TurnInProgress(self.conversation_id, retry_after, waited=True)
            if self.policy.on_busy == "cancel" and not asked:
                asked = self.store.request_cancel(self.conversation_id, now)
                if asked:
                    self.observer.cancel_requested()
            since = now if since is None else since
            self.sleep(pause)
            pause = min(pause * 2, 0.5)
        if since is not None:
            self.observer.lease_waited(self.clock() - since)

    def beat(self) -> bool:
        """Renew the lease (the heartbeat thread calls this); False once it needs no more."""
        with self._beating:
            if not self._beats:
                return False
            try:
                lease = self.store.renew_lease(self.conversation_id, self.holder,
                                               self.policy.ttl_s, self.clock())
            except Exception:  # noqa: BLE001 - a closed store: the turn is ending anyway
                self._beats = False
                return False
            if not lease.granted:
                self.lost = self.stopped = True
            elif lease.cancel_requested:
                self.stopped = True
            return True

    def _stop(self) -> None:
        with self._beating:  # once this returns, no renewal is running or will run
            self._beats = False
        HEARTBEAT.forget(self)


class Heartbeat:
    """The one thread that renews every lease this process holds, each every
    ``heartbeat_s`` after it was taken. One thread for all turns, rather than one per turn:
    starting and joining a thread cost each turn more than its lease's two writes did. A turn
    that ends is forgotten at once, so the thread wakes only when a renewal is due, not once
    for every turn that was shorter than a heartbeat."""

    def __init__(self) -> None:
        self._due: dict[Holding, float] = {}  # the held leases, and when each renews next
        self._wake = threading.Condition()
        self._sleeps_until = float("inf")
        self._thread: threading.Thread | None = None

    def keep(self, holding: Holding) -> None:
        with self._wake:
            due = self._due[holding] = time.monotonic() + holding.policy.heartbeat_s
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="threadline-heartbeat",
                                                daemon=True)
                self._thread.start()
            elif due < self._sleeps_until:
                self._wake.notify()

    def forget(self, holding: Holding) -> None:
        with self._wake:
            self._due.pop(holding, None)

    def _run(self) -> None:
        while True:
            with self._wake:
                now = time.monotonic()
                due = [holding for holding, at in self._due.items() if at <= now]
                if not due:
                    self._sleeps_until = min(self._due.values(), default=float("inf"))
                    self._wake.wait(None if not self._due else self._sleeps_until - now)
                    continue
                for holding in due:
                    self._due[holding] = now + holding.policy.heartbeat_s
                self._sleeps_until = now  # renewing: a new holding need not wake us
            for holding in due:  # outside the lock: a renewal is a write; keep() must not wait
                if not holding.beat():
                    self.forget(holding)


HEARTBEAT = Heartbeat()


@contextmanager
def hold(store: Store, conversation_id: str, policy: LeasePolicy, *,
         clock: Callable[[], float] = time.time,
         sleep: Callable[[float], None] = time.sleep,
         observer: Observer = QUIET) -> Iterator[Holding]:
    """A turn's hold on the conversation's lease, not taken yet: the turn's first commit
    takes it (or ``take`` does), and if another holder has it then, the commit writes nothing
    and the turn waits (``wait``); given back when the block ends."""
    holding = Holding(store, conversation_id, policy, clock, sleep, observer)
    try:
        yield holding
    finally:
        holding.end()


def watched(on_text: Callable[[str], None] | None, holding: Holding) -> Callable[[str], None]:
    """``on_text`` that also keeps the lease and stops when a newer message cancels."""
    def each(piece: str) -> None:
        holding.check()
        if on_text is not None:
            on_text(piece)
    return each
