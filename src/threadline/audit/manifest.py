"""The manifest: what an export directory holds, and what it was made from.

``manifest.json`` at the export's root lists every finished file with its table, day, row
count, size and sha256, and for each finished day its row count per table. A file is listed
only once it is written whole, and a day only once all of its files are, so a resumed export
trusts exactly what is listed. The manifest holds no time of writing: the same log exported
with the same options gives the same manifest, byte for byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import InputError

NAME = "manifest.json"
FORMAT = "threadline-audit"
VERSION = 1


@dataclass(frozen=True)
class FileEntry:
    path: str
    table: str
    day: str
    first: int   # the first and last row of the day's table this file holds (from 0)
    last: int
    rows: int
    bytes: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "table": self.table, "day": self.day, "first": self.first,
                "last": self.last, "rows": self.rows, "bytes": self.bytes,
                "sha256": self.sha256}


@dataclass
class Manifest:
    source: str
    options: dict[str, Any]
    files: dict[str, FileEntry] = field(default_factory=dict)
    days: dict[str, dict[str, int]] = field(default_factory=dict)  # finished: rows per table

    def to_bytes(self) -> bytes:
        body = {"format": FORMAT, "version": VERSION, "source": self.source,
                "options": self.options,
                "days": {day: self.days[day] for day in sorted(self.days)},
                "files": [self.files[p].to_json() for p in sorted(self.files)]}
        return (json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()

    def day_files(self, day: str) -> list[FileEntry]:
        return [f for f in self.files.values() if f.day == day]

    @classmethod
    def parse(cls, data: bytes, where: str) -> Manifest:
        """A manifest read back, or an InputError saying why ``where`` holds none of ours."""
        def foreign(why: str) -> InputError:
            return InputError(f"{where} holds a manifest.json that is not a threadline audit "
                              f"manifest ({why}); nothing was written",
                              hint="export to an empty directory or prefix")
        try:
            body = json.loads(data)
        except (UnicodeDecodeError, ValueError):
            raise foreign("not JSON") from None
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise foreign(f"its format is not {FORMAT!r}")
        if body.get("version") != VERSION:
            raise foreign(f"version {body.get('version')!r}; this threadline reads {VERSION}")
        try:
            files = {f["path"]: FileEntry(**f) for f in body["files"]}
            days = {str(d): {str(t): int(n) for t, n in rows.items()}
                    for d, rows in body["days"].items()}
            return cls(str(body["source"]), dict(body["options"]), files, days)
        except (KeyError, TypeError, AttributeError) as err:
            raise foreign(f"a field is missing or malformed: {err}") from None
