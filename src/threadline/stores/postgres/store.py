"""The store for server fleets: PostgreSQL through psycopg 3 and a connection pool.

Every replica opens its own pool on one database; a commit takes its conversation's row
``FOR UPDATE``, so writers of one conversation queue on the database (whichever replica they
run in) while other conversations commit in parallel. The log itself is
:class:`~threadline.stores.relational.RelationalStore`; this module only connects it (memory
and corpora search with tsvector columns: ``fulltext.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from threadline.errors import InputError, StoreError
from threadline.stores.migrations import SchemaStatus
from threadline.stores.postgres import schema
from threadline.stores.postgres.fulltext import TSVECTOR
from threadline.stores.relational import Cursor, Execute, RelationalStore, Violation
from threadline.stores.sessions import Session
from threadline.stores.transcripts import fill_missing

Connection = psycopg.Connection[tuple[Any, ...]]


class PostgresStore(RelationalStore):
    """A :class:`~threadline.stores.base.Store` over one PostgreSQL database."""

    CALL_ORDER = "position"
    UTC_DAY = "({} AT TIME ZONE 'UTC')::date"
    LOCK_CONVERSATION = "SELECT 1 FROM conversations WHERE id = ? FOR UPDATE"
    INTEGRITY_ERRORS = (errors.IntegrityError,)
    FULL_TEXT = TSVECTOR

    def __init__(self, url: str, *, max_connections: int = 10,
                 connect_timeout_s: float = 10.0) -> None:
        super().__init__()
        self.path = redact(url)
        timeout = max(1, round(connect_timeout_s))
        try:  # one plain connection first: its error says why, where a pool's would not
            with psycopg.connect(url, autocommit=True, connect_timeout=timeout) as conn:
                schema.require_current(conn, self.path)
        except psycopg.OperationalError as err:
            raise _unreachable(self.path, err) from err
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url, min_size=1, max_size=max_connections, open=False, timeout=connect_timeout_s,
            kwargs={"autocommit": True, "connect_timeout": timeout}, configure=_configure,
            name="threadline")
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except PoolTimeout as err:
            self._pool.close()
            raise _unreachable(self.path, err) from err

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def _begin(self) -> Iterator[Execute]:
        with self._checkout() as conn, conn.transaction():
            yield _executor(conn, self.path)

    @contextmanager
    def _connect(self) -> Iterator[Execute]:
        with self._checkout() as conn:
            yield _executor(conn, self.path)

    @contextmanager
    def _checkout(self) -> Iterator[Connection]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as err:
            raise _unreachable(self.path, err) from err

    def _violation(self, err: Exception) -> Violation:
        if isinstance(err, errors.ForeignKeyViolation):
            return "foreign_key"
        constraint = getattr(getattr(err, "diag", None), "constraint_name", None)
        return "client_msg_id" if constraint == "items_by_client_msg_id" else "other"


TRANSCRIPTS = 7  # the migration that gave items their transcript hashes


def migrate(url: str) -> tuple[SchemaStatus, list[int]]:
    """Bring the database at ``url`` to this threadline's schema; what was applied."""
    where = redact(url)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            applied = schema.migrate(conn, where)
            status = schema.status(conn, where)
            if status.version >= TRANSCRIPTS:  # rows from before it get their hashes
                with conn.transaction():
                    fill_missing(Session(_executor(conn, where), writing=True))
            return status, applied
    except psycopg.OperationalError as err:
        raise _unreachable(where, err) from err


def schema_status(url: str) -> SchemaStatus:
    where = redact(url)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            return schema.status(conn, where)
    except psycopg.OperationalError as err:
        raise _unreachable(where, err) from err


def redact(url: str) -> str:
    """The connection string without its password, for messages and logs."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise InputError("the database URL is not a valid PostgreSQL connection string",
                         hint="use postgresql://user@host:5432/dbname") from None
    params.pop("password", None)
    return make_conninfo("", **params)


def _configure(conn: Connection) -> None:
    conn.execute("SET TIME ZONE 'UTC'")


@functools.lru_cache(maxsize=512)
def _placeholders(sql: str) -> str:
    """The shared SQL's ``?`` placeholders as psycopg's ``%s`` (the SQL has no ``%``)."""
    return sql.replace("?", "%s")


def _executor(conn: Connection, where: str) -> Execute:
    cursor = conn.cursor()

    def execute(sql: str, params: Sequence[Any]) -> Cursor:
        try:
            return cursor.execute(_placeholders(sql).encode("utf-8"), params)
        except psycopg.OperationalError as err:
            raise _unreachable(where, err) from err
        except psycopg.DataError as err:
            if "0x00" in str(err):  # PostgreSQL text cannot hold NUL; JSON escapes it
                raise InputError("text stored outside JSON may not contain NUL (\\x00) "
                                 "characters on PostgreSQL") from err
            raise

    return execute


def _unreachable(where: str, err: Exception) -> StoreError:
    return StoreError(f"cannot use the PostgreSQL database {where}: {str(err).strip()}",
                      hint="check THREADLINE_DATABASE_URL and that the server is running")
