"""Numbered schema migrations shipped as SQL files, shared by the SQLite and PostgreSQL stores.

Each backend keeps an append-only list ``migrations/NNNN_name.sql`` in its package and records
what it applied in a ``threadline_migrations`` table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load(package: str) -> list[Migration]:
    """The numbered migrations shipped in ``package``'s ``migrations`` folder, in order."""
    found = []
    for entry in resources.files(package).joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{package} migrations are not numbered 1..n: "
                           f"{[m.version for m in found]}")
    return found


@dataclass(frozen=True)
class SchemaStatus:
    backend: str   # "sqlite" or "postgres"
    where: str
    version: int   # applied
    latest: int    # shipped with this threadline

    @property
    def pending(self) -> list[int]:
        return list(range(self.version + 1, self.latest + 1))

    def to_json(self) -> dict[str, object]:
        return {"backend": self.backend, "database": self.where, "version": self.version,
                "latest": self.latest, "pending": self.pending}
