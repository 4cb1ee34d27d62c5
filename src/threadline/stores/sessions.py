"""Statements on one connection (a :class:`Session`), and how the parts kept beside the log
reach its database (a :class:`Database`): the pieces every SQL module in ``stores/`` shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

Lineage = list[tuple[str, int]]


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


Execute = Callable[[str, Sequence[Any]], Cursor]


@dataclass
class Session:
    """One connection's statements: a transaction's, or a read's. SQL uses ``?`` placeholders
    (the PostgreSQL store rewrites them)."""

    execute: Execute
    writing: bool
    new_lineages: dict[tuple[str, str], Lineage] = field(default_factory=dict)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.execute(sql, params).fetchone()

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.execute(sql, params).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self.execute(sql, params).rowcount


@dataclass(frozen=True)
class Database:
    """The log's database, for the tables kept beside it (memory, corpora)."""

    transaction: Callable[[], AbstractContextManager[Session]]  # commits at the end, or not
    reading: Callable[[], AbstractContextManager[Session]]
    integrity_errors: tuple[type[Exception], ...]  # what a broken constraint raises
