"""Group commit: concurrent commits on one SQLite connection share a transaction and its fsync.

SQLite has one writer at a time, and a commit holds that writer through its fsync. Under
concurrent turns the commits queue for it one by one, each paying its own fsync, and the
queue (not the CPU) sets the service's throughput. Here the first commit to arrive leads: it
takes the connection, runs every commit queued behind it (up to ``MAX_GROUP``), each inside
its own savepoint, and commits them together; the others wait for the outcome. A lone commit
is a group of one, with no wait added.

What each commit sees is what it would see alone: the commits of a group run one after the
other on the connection, so each reads what the ones before it wrote. Each is atomic: one
that raises is rolled back to its savepoint and gets its error; the rest are unaffected.
None returns before the group's ``COMMIT``; if that fails, or an error takes the whole
transaction with it (SQLite rolls back on a full disk, for instance), every commit of the
group gets the error and none of them is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from threadline.stores.sessions import Execute, Session

T = TypeVar("T")
MAX_GROUP = 32  # commits in one transaction at most: a bound on the leader's extra work


@dataclass(eq=False)
class _Pending(Generic[T]):
    work: Callable[[Session], T]
    done: bool = False
    result: Any = None
    error: BaseException | None = None
    session: Session | None = field(default=None, repr=False)

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[no-any-return]


class GroupCommit:
    """Runs ``work(session)`` functions in shared transactions. ``begin`` opens one on the
    writing connection and yields its ``execute`` (it commits on a clean exit and rolls back
    on an exception); ``in_transaction`` says whether the connection still holds one;
    ``committed`` receives each successful commit's session, once the group is durable."""

    def __init__(self, begin: Callable[[], AbstractContextManager[Execute]],
                 in_transaction: Callable[[], bool],
                 committed: Callable[[Session], None]) -> None:
        self._begin, self._in_transaction, self._committed = begin, in_transaction, committed
        self._queue: list[_Pending[Any]] = []
        self._turn = threading.Condition()

    def run(self, work: Callable[[Session], T]) -> T:
        mine: _Pending[T] = _Pending(work)
        with self._turn:
            self._queue.append(mine)
            while not mine.done and self._queue[0] is not mine:
                self._turn.wait()
            if mine.done:
                return mine.outcome()
            group = self._queue[:MAX_GROUP]  # this thread leads: it and whoever queued behind
        try:
            self._run(group)
        finally:
            with self._turn:
                del self._queue[:len(group)]
                for pending in group:
                    pending.done = True
                self._turn.notify_all()
        return mine.outcome()

    def _run(self, group: list[_Pending[Any]]) -> None:
        try:
            with self._begin() as execute:
                if len(group) == 1:  # alone: its transaction is its savepoint
                    self._one(group[0], execute)
                else:
                    for pending in group:
                        execute("SAVEPOINT group_member", ())
                        try:
                            self._one(pending, execute)
                        except Exception as err:
                            if not self._in_transaction():  # it took the transaction with it
                                raise
                            execute("ROLLBACK TO group_member", ())
                            pending.error = err
                        execute("RELEASE group_member", ())
        except BaseException as err:  # nothing of the group was written
            for pending in group:
                pending.error, pending.session = err, None
            return
        for pending in group:
            if pending.session is not None:
                self._committed(pending.session)

    @staticmethod
    def _one(pending: _Pending[Any], execute: Execute) -> None:
        session = Session(execute, writing=True)
        pending.result = pending.work(session)
        pending.session = session
