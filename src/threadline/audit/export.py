"""Export the log as Parquet, one UTC day at a time, resumably.

Layout under the target: ``TABLE/date=YYYY-MM-DD/part-FIRST-LAST.parquet`` (Hive-style
partitions, FIRST and LAST the day's row numbers the file holds, from 0), and
``manifest.json``. For each day the rows are read and ordered, cut into files of at most
``rows_per_file`` rows, and each file is encoded in memory; a file the manifest already lists
with the same sha256 (and that is there, at that size) is not written again, and one it
lists that the day no longer has is removed. So an export killed anywhere resumes where it
stopped without a duplicate row, a second export of the same log writes nothing, and the same
log exported anywhere gives the same bytes.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from threadline.audit.manifest import NAME, FileEntry, Manifest
from threadline.audit.rows import Entries, Pricing, Row, day_tables
from threadline.audit.tables import TABLES, arrow_table, parquet_bytes
from threadline.audit.target import Target
from threadline.errors import InputError
from threadline.items import utc_now
from threadline.stores.audit import AuditBackend
from threadline.stores.base import Store

ROWS_PER_FILE = 100_000
BYTES_PER_FILE = 128 * 2**20  # of request bytes, before compression: a file stays loadable


@dataclass(frozen=True)
class ExportOptions:
    pricing: Pricing
    content: bool = True
    rows_per_file: int = ROWS_PER_FILE

    def to_json(self) -> dict[str, Any]:
        return {"content": self.content, "profile": self.pricing.profile.name,
                "input_price": self.pricing.input_price, "rows_per_file": self.rows_per_file}


@dataclass
class ExportResult:
    target: str
    since: str | None
    until: str
    days: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    written: int = 0     # files written
    unchanged: int = 0   # files already there with the same bytes
    removed: int = 0     # files the log no longer has
    bytes_written: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "since": self.since, "until": self.until,
                "days": self.days, "rows": self.rows, "files_written": self.written,
                "files_unchanged": self.unchanged, "files_removed": self.removed,
                "bytes_written": self.bytes_written}


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def audit_of(store: Store) -> AuditBackend:
    audit = store.audit
    if audit is None:
        raise InputError(f"{type(store).__name__} cannot be read for an audit export",
                         hint="export a SQLite or PostgreSQL store")
    return audit


def open_manifest(target: Target, source: str, options: ExportOptions) -> Manifest | None:
    """The target's manifest, checked to be one this export may continue; None for an empty
    target. InputError for anything else, before anything is written."""
    target.check()
    data = target.read(NAME)
    if data is None:
        stray = [f for f in target.files() if not f.endswith(".partial")]
        if stray:
            raise InputError(f"{target.url} is not empty and holds no manifest.json (it has "
                             f"{stray[0]}); nothing was written",
                             hint="export to an empty directory or prefix")
        return None
    manifest = Manifest.parse(data, target.url)
    if manifest.source != source:
        raise InputError(f"{target.url} holds an export of {manifest.source}, not of {source};"
                         " nothing was written", hint="export to another --out")
    if manifest.options != options.to_json():
        differ = ", ".join(f"{k}={manifest.options.get(k)!r}" for k, v in options.to_json()
                           .items() if manifest.options.get(k) != v)
        raise InputError(f"{target.url} holds an export made with other options ({differ}); "
                         "nothing was written",
                         hint="export with the same options, or to another --out")
    return manifest


def export(store: Store, target: Target, options: ExportOptions, *,
           since: date | None = None, until: date | None = None,
           after_file: Callable[[str], None] | None = None) -> ExportResult:
    """Export the days from ``since`` to ``until`` (UTC, both included; default: from the
    newest day the target already holds, or the log's first, to today)."""
    audit = audit_of(store)
    until = until or utc_now().date()
    if since is not None and since > until:
        raise InputError(f"--since {since} is after --until {until}; nothing was written",
                         hint="give --since on or before --until")
    manifest = open_manifest(target, store.path, options)
    held = set() if manifest is None else {f.day for f in manifest.files.values()} | \
        set(manifest.days)
    if since is None and held:  # carry on from the newest day held: it may have grown since
        since = min(date.fromisoformat(max(held)), until)
    result = ExportResult(target.url, None if since is None else since.isoformat(),
                          until.isoformat())
    if manifest is None:
        manifest = Manifest(store.path, options.to_json())
        target.write(NAME, manifest.to_bytes())  # claimed before any data file is written
    for leftover in target.files():
        if leftover.endswith(".partial"):  # a killed export's unfinished file
            target.delete(leftover)
    jobs = _jobs_by_conversation(store)
    entries = Entries(store)
    seen: set[str] = set()
    encoder = ThreadPoolExecutor(1, thread_name_prefix="audit-encode")
    try:
        writer = _Writer(target, manifest, options, result, after_file, encoder)
        for day, active in _activity(audit, since, until).items():
            start, end = day_start(day), day_start(day + timedelta(days=1))
            with _collector_paused():
                writer.day(day.isoformat(), day_tables(audit, start, end, options.pricing,
                                                       jobs, entries, active))
            seen.add(day.isoformat())
            result.days.append(day.isoformat())
        low = "" if since is None else since.isoformat()
        for gone in sorted(held):
            if low <= gone <= until.isoformat() and gone not in seen:
                # the log no longer has anything that day
                writer.day(gone, ((name, []) for name in TABLES))
    finally:  # a failed or interrupted export encodes nothing more
        encoder.shutdown(wait=True, cancel_futures=True)
    return result


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while a day's rows are built and encoded: they are tens
    of thousands of small containers in no cycle (the rows, then their values taken row by row
    to be transposed into columns), which reference counting frees, and each collection the
    allocations set off walks every object the process holds (in a process that has just
    replayed or served a log, a third of the export's time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _activity(audit: AuditBackend, since: date | None, until: date) -> dict[date, list[str]]:
    """The days to export and each one's conversations, read once for the whole window: a
    conversation that starts on a day after this read and before that day is exported is
    left to the next export, which carries on from the newest day held."""
    start = day_start(since) if since is not None else datetime.min.replace(tzinfo=UTC)
    return audit.activity(start, day_start(until + timedelta(days=1)))


def _jobs_by_conversation(store: Store) -> dict[str, list[Any]]:
    memory = store.memory
    out: dict[str, list[Any]] = {}
    for job in [] if memory is None else memory.jobs("done"):
        out.setdefault(job.conversation_id, []).append(job)
    return out


class _Writer:
    def __init__(self, target: Target, manifest: Manifest, options: ExportOptions,
                 result: ExportResult, after_file: Callable[[str], None] | None,
                 encoder: Executor) -> None:
        self.target, self.manifest, self.options = target, manifest, options
        self.result, self.after_file = result, after_file
        self.encoder = encoder  # one thread: files are encoded in the order they are asked for

    def _save(self) -> None:
        self.target.write(NAME, self.manifest.to_bytes())

    def day(self, day: str, tables: Iterable[tuple[str, list[Row]]]) -> None:
        """Write the day's files. Each file's Arrow table is built here as soon as its table
        comes (``day_tables`` gives calls and requests before it builds the rest), and its
        bytes are written on the encoding thread meanwhile; then the files go to the target
        in the same order, each listed in the manifest once it is there."""
        counts: dict[str, int] = {}
        encoding: dict[str, list[tuple[int, int, Future[bytes]]]] = {}
        for name, table_rows in tables:
            counts[name] = len(table_rows)
            self.result.rows[name] += len(table_rows)
            encoding[name] = [
                (first, len(chunk), self.encoder.submit(parquet_bytes, arrow_table(
                    TABLES[name], chunk, content=self.options.content)))
                for first, chunk in _chunks(table_rows, self.options.rows_per_file,
                                            _REQUEST_AT.get(name))]
        planned: set[str] = set()
        for name, files in encoding.items():  # the first tables' files while the last encodes
            for first, rows, encoded in files:
                planned.add(self._file(name, day, first, rows, encoded.result()))
        counts = {name: counts[name] for name in TABLES if name in counts}
        stale = [f.path for f in self.manifest.day_files(day) if f.path not in planned]
        if stale:
            self._unfinish(day)
            for path in stale:
                del self.manifest.files[path]
        if self.manifest.days.get(day) != counts:
            self.manifest.days[day] = counts
            self._save()
        for path in stale:  # unlisted first, so a kill in between leaves nothing trusted
            self.target.delete(path)
            self.result.removed += 1

    def _unfinish(self, day: str) -> None:
        """The day is not finished until each of its files is as the log has it now."""
        if self.manifest.days.pop(day, None) is not None:
            self._save()

    def _file(self, name: str, day: str, first: int, rows: int, data: bytes) -> str:
        last = first + rows - 1
        path = f"{name}/date={day}/part-{first:09d}-{last:09d}.parquet"
        entry = FileEntry(path, name, day, first, last, rows, len(data),
                          hashlib.sha256(data).hexdigest())
        if self.manifest.files.get(path) == entry and self.target.size(path) == len(data):
            self.result.unchanged += 1
            return path
        if self.manifest.files.pop(path, None) is not None:  # replaced: trusted no longer
            self.manifest.days.pop(day, None)
            self._save()
        else:
            self._unfinish(day)
        self.target.write(path, data)
        self.manifest.files[path] = entry
        self._save()
        self.result.written += 1
        self.result.bytes_written += len(data)
        if self.after_file is not None:
            self.after_file(path)
        return path


# where a table's row holds its request's bytes, for the tables that have them
_REQUEST_AT = {name: table.names.index("request") for name, table in TABLES.items()
               if "request" in table.names}


def _chunks(rows: list[Row], limit: int, request_at: int | None = None
            ) -> Iterator[tuple[int, list[Row]]]:
    """Consecutive runs of at most ``limit`` rows and about BYTES_PER_FILE request bytes
    (``request_at``: where a row holds them)."""
    if request_at is None:  # no request bytes: cut by count alone, no pass over the rows
        for start in range(0, len(rows), limit):
            yield start, rows[start:start + limit]
        return
    start, size = 0, 0
    for n, row in enumerate(rows):
        request = row[request_at]
        size += len(request) if isinstance(request, bytes) else 0
        if n + 1 - start >= limit or size >= BYTES_PER_FILE:
            yield start, rows[start:n + 1]
            start, size = n + 1, 0
    if start < len(rows):
        yield start, rows[start:]
