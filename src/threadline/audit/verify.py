"""Check an export: every file against the manifest, and the exported items against the log.

Files: each listed file is there, at its size, with its sha256, a readable Parquet file of its
table with its row count; each finished day's files add up to the day's counts; a day whose
export did not finish, and any file the manifest does not list, are reported. The log (when a
store is given): every exported conversation's hash chains verify (``stores/verify.py``), and
each item hash the export records is the hash that item has in the log.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from threadline.audit.manifest import NAME, Manifest
from threadline.audit.target import Target
from threadline.errors import InputError, UnknownConversation
from threadline.stores.base import Store
from threadline.stores.verify import verify_conversation

# the item hashes each table records: (seq column, hash column)
_HASHES = {"turns": [("user_seq", "user_hash"), ("reply_seq", "reply_hash")],
           "compactions": [("seq", "hash")], "memory_writes": [("seq", "item_hash")]}


@dataclass(frozen=True, order=True)
class Finding:
    where: str   # the file, a table's day, or the log's conversation
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "detail": self.detail}


@dataclass
class Verified:
    target: str
    files: int = 0
    rows: int = 0
    conversations: int | None = None  # checked against the log (None: not checked)
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "ok": self.ok, "files": self.files, "rows": self.rows,
                "conversations_checked": self.conversations,
                "findings": [f.to_json() for f in self.findings]}


def verify(target: Target, store: Store | None) -> Verified:
    target.check()
    data = target.read(NAME)
    if data is None:
        raise InputError(f"{target.url} holds no {NAME}: it is not an audit export",
                         hint="name the directory or prefix given to: threadline audit export")
    manifest = Manifest.parse(data, target.url)
    result = Verified(target.url)
    found = result.findings
    present = set(target.files())
    hashes: dict[str, dict[int, tuple[str, str]]] = defaultdict(dict)
    counted: dict[tuple[str, str], int] = defaultdict(int)
    for entry in sorted(manifest.files.values(), key=lambda f: f.path):
        counted[(entry.table, entry.day)] += entry.rows
        if entry.path not in present:
            found.append(Finding(entry.path, "listed in the manifest but missing"))
            continue
        body = target.read(entry.path) or b""
        result.files += 1
        if len(body) != entry.bytes:
            found.append(Finding(entry.path, f"{len(body)} bytes, the manifest says "
                                             f"{entry.bytes}"))
        elif hashlib.sha256(body).hexdigest() != entry.sha256:
            found.append(Finding(entry.path, "sha256 differs from the manifest's: the file "
                                             "was changed after it was exported"))
        else:
            table = _read(entry.path, body, entry.table, found)
            if table is None:
                continue
            result.rows += table.num_rows
            if table.num_rows != entry.rows:
                found.append(Finding(entry.path, f"{table.num_rows} rows, the manifest says "
                                                 f"{entry.rows}"))
            for seq_column, hash_column in _HASHES.get(entry.table, []):
                _collect(table, seq_column, hash_column, entry.path, hashes)
    for path in sorted(present - set(manifest.files) - {NAME}):
        found.append(Finding(path, "not listed in the manifest"))
    for day in sorted({f.day for f in manifest.files.values()} - set(manifest.days)):
        found.append(Finding(f"date={day}", "the export of this day did not finish; run the "
                                            "same export again to resume it"))
    for day, counts in sorted(manifest.days.items()):
        for table, rows in sorted(counts.items()):
            if counted[(table, day)] != rows:
                found.append(Finding(f"{table}/date={day}", f"the manifest lists files of "
                                     f"{counted[(table, day)]} rows; the day had {rows}"))
    if store is not None:
        result.conversations = len(hashes)
        for conversation_id in sorted(hashes):
            _check_log(store, conversation_id, hashes[conversation_id], found)
    found.sort()
    return result


def _read(path: str, body: bytes, table: str, found: list[Finding]) -> pa.Table | None:
    try:
        read = pq.read_table(pa.BufferReader(body))
    except (pa.ArrowException, OSError) as err:
        found.append(Finding(path, f"not a readable Parquet file: {err}"))
        return None
    named = (read.schema.metadata or {}).get(b"threadline.audit.table", b"").decode()
    if named != table:
        found.append(Finding(path, f"holds the {named or 'unknown'} table, not {table}"))
        return None
    return read


def _collect(table: pa.Table, seq_column: str, hash_column: str, path: str,
             into: dict[str, dict[int, tuple[str, str]]]) -> None:
    columns = table.select(["conversation_id", seq_column, hash_column]).to_pydict()
    for cid, seq, digest in zip(columns["conversation_id"], columns[seq_column],
                                columns[hash_column], strict=True):
        if seq is not None and digest is not None:
            into[cid][int(seq)] = (digest, path)


def _check_log(store: Store, conversation_id: str, exported: dict[int, tuple[str, str]],
               found: list[Finding]) -> None:
    where = f"log: conversation {conversation_id}"
    try:
        problems = verify_conversation(store, conversation_id)
    except UnknownConversation:
        first = min(exported.values(), key=lambda v: v[1])[1]
        found.append(Finding(first, f"conversation {conversation_id} is not in the log"))
        return
    found.extend(Finding(where, f"item {p.seq} on {p.branch}: {p.detail}") for p in problems)
    audit = store.audit
    logged = {} if audit is None else {i.seq: i.hash for i in audit.items(conversation_id)}
    for seq, (digest, path) in sorted(exported.items()):
        if seq not in logged:
            found.append(Finding(path, f"conversation {conversation_id} item {seq} is not in "
                                       "the log"))
        elif logged[seq] != digest:
            found.append(Finding(path, f"conversation {conversation_id} item {seq} has hash "
                                       f"{digest} here and {logged[seq]} in the log"))
