"""``threadline db``: the database's schema version, and migrating it.

SQLite files migrate themselves when opened (one process owns them); a PostgreSQL database
shared by a fleet changes only when someone runs ``threadline db migrate``.
"""

from __future__ import annotations

import click

from threadline.cli._common import Context, json_option, output, pass_context
from threadline.settings import Settings
from threadline.stores import SQLiteStore, postgres_backend
from threadline.stores.migrations import SchemaStatus
from threadline.stores.sqlite import schema as sqlite_schema


@click.group()
def db() -> None:
    """Inspect and migrate the database schema."""


@db.command()
@json_option()
@pass_context
def status(ctx: Context, as_json: bool) -> None:
    """Show the schema version applied and what is pending."""
    found = _status(ctx.settings)
    pending = ", ".join(map(str, found.pending)) or "none"
    output(found.to_json(), as_json, f"{found.backend} {found.where}: schema version "
           f"{found.version} of {found.latest}; pending: {pending}")


@db.command()
@json_option()
@pass_context
def migrate(ctx: Context, as_json: bool) -> None:
    """Apply pending schema migrations (each exactly once, even if run twice at once)."""
    settings = ctx.settings
    if settings.database_url is not None:
        found, applied = postgres_backend().migrate(settings.database_url)
    else:
        before = _status(settings)
        SQLiteStore(settings.db_path, durability=settings.durability).close()
        found = _status(settings)
        applied = list(range(before.version + 1, found.version + 1))
    done = "applied " + ", ".join(map(str, applied)) if applied else "nothing to apply"
    output({**found.to_json(), "applied": applied}, as_json,
           f"{found.backend} {found.where}: at schema version {found.version} ({done})")


def _status(settings: Settings) -> SchemaStatus:
    if settings.database_url is not None:
        status: SchemaStatus = postgres_backend().schema_status(settings.database_url)
        return status
    return sqlite_schema.status(settings.db_path)
