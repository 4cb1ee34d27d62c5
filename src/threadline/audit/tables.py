"""The audit tables' columns, and how a batch of rows becomes Parquet bytes.

Each table is a list of columns, some marked as content (what a user or a model wrote, and the
exact request bytes): ``--no-content`` leaves those out. The writer's settings are fixed here
and the file carries no time of writing, so the same rows always give the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

FORMAT_VERSION = 1
ROW_GROUP_ROWS = 16_384
_TIME = pa.timestamp("us", tz="UTC")
_IDS = pa.list_(pa.string())
_SEQS = pa.list_(pa.int64())


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    content: bool = False  # left out by --no-content


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]

    def schema(self, *, content: bool) -> pa.Schema:
        fields = [pa.field(c.name, c.type) for c in self.columns if content or not c.content]
        return pa.schema(fields, metadata={"threadline.audit.table": self.name,
                                           "threadline.audit.version": str(FORMAT_VERSION)})

    def content_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.content]

    @property
    def names(self) -> list[str]:
        """Every column's name, in the order a row (a tuple) holds their values."""
        return [c.name for c in self.columns]

    def at(self, *names: str) -> itemgetter[Any]:
        """A row's values of those columns, as a sort key."""
        return itemgetter(*(self.names.index(name) for name in names))


def _columns(*spec: tuple[str, pa.DataType] | tuple[str, pa.DataType, bool]) -> tuple[Column, ...]:
    return tuple(Column(*s) for s in spec)


TURNS = Table("turns", _columns(
    ("conversation_id", pa.string()), ("branch", pa.string()), ("turn", pa.int64()),
    ("started_at", _TIME),
    ("user_seq", pa.int64()), ("user_hash", pa.string()),
    ("reply_seq", pa.int64()), ("reply_hash", pa.string()),
    ("status", pa.string()),  # ok | failed | unanswered | imported
    ("query", pa.string(), True), ("rewritten_query", pa.string(), True),
    ("rewrite_winner", pa.string()),
    ("retrieved_ids", _IDS), ("recalled_ids", _IDS),
    ("reply", pa.string(), True),
    ("calls", pa.int64()), ("call_ids", _IDS), ("model", pa.string()),
    ("prompt_tokens", pa.int64()), ("cached_tokens", pa.int64()),
    ("completion_tokens", pa.int64()),
    ("cost_usd", pa.float64()), ("uncached_cost_usd", pa.float64()),
    ("prefix_ratio", pa.float64()), ("prefix_cause", pa.string()),
    ("prefix_expected", pa.bool_()), ("prefix_report", pa.string()),
    ("ttft_ms", pa.float64()), ("total_ms", pa.float64()),
))

CALLS = Table("calls", _columns(
    ("call_id", pa.string()), ("conversation_id", pa.string()), ("branch", pa.string()),
    ("turn", pa.int64()), ("purpose", pa.string()), ("status", pa.string()),
    ("model", pa.string()), ("started_at", _TIME),
    ("head_seq", pa.int64()), ("reply_seq", pa.int64()),
    ("request_sha256", pa.string()), ("request_bytes", pa.int64()),
    ("prompt_tokens", pa.int64()), ("cached_tokens", pa.int64()),
    ("completion_tokens", pa.int64()), ("ttft_ms", pa.float64()), ("total_ms", pa.float64()),
    ("cost_usd", pa.float64()), ("prefix_report", pa.string()),
    ("error", pa.string(), True), ("response", pa.string(), True),
))

REQUESTS = Table("requests", _columns(
    ("request_sha256", pa.string()), ("request_bytes", pa.int64()),
    ("encoding", pa.string()),  # rendered-prompt | canonical-json
    ("request", pa.binary(), True),
))

COMPACTIONS = Table("compactions", _columns(
    ("conversation_id", pa.string()), ("branch", pa.string()), ("seq", pa.int64()),
    ("turn", pa.int64()), ("hash", pa.string()), ("created_at", _TIME),
    ("strategy", pa.string()), ("reason", pa.string()),
    ("through_seq", pa.int64()), ("kept_from_seq", pa.int64()),
    ("cleared_seqs", _SEQS), ("pinned_seqs", _SEQS),
    ("pinned_constraints", _IDS, True), ("summary", pa.string(), True),
    ("tokens_before", pa.int64()), ("tokens_after", pa.int64()),
    ("kept_prefix_tokens", pa.int64()), ("append_usd", pa.float64()),
    ("compact_usd", pa.float64()),
))

MEMORY_WRITES = Table("memory_writes", _columns(
    ("conversation_id", pa.string()), ("seq", pa.int64()), ("item_hash", pa.string()),
    ("position", pa.int64()), ("user_id", pa.string()), ("message_at", _TIME),
    ("decision", pa.string()), ("entry_id", pa.string()), ("replaces", pa.string()),
    ("reason", pa.string()), ("extractor", pa.string()), ("valid", pa.bool_()),
    ("entry_source", pa.string()), ("entry_trusted", pa.bool_()),
    ("attempts", pa.int64()), ("text", pa.string(), True),
))

TABLES: dict[str, Table] = {t.name: t for t in (TURNS, CALLS, REQUESTS, COMPACTIONS,
                                                 MEMORY_WRITES)}


def arrow_table(table: Table, rows: Sequence[Sequence[Any]], *, content: bool) -> pa.Table:
    """``rows``, each a tuple of the table's columns in order, as an Arrow table of the file's
    schema (Python's values converted: this holds the interpreter, where ``parquet_bytes``
    does not)."""
    schema = table.schema(content=content)
    # rows built as tuples and transposed by zip: no dict a row, no lookup a cell
    values = zip(*rows, strict=True) if rows else (() for _ in table.columns)
    return pa.Table.from_pydict({c.name: v for c, v in zip(table.columns, values, strict=True)
                                 if content or not c.content}, schema=schema)


def parquet_bytes(data: pa.Table) -> bytes:
    """The file's bytes, written by pyarrow's C++ writer, which lets go of the interpreter
    while it encodes and compresses (so another thread can build rows meanwhile): the same
    rows give the same bytes (fixed settings, no timestamps, statistics and dictionaries
    decided by the data alone)."""
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, row_group_size=ROW_GROUP_ROWS, compression="zstd",
                   compression_level=3, use_dictionary=True, write_statistics=True,
                   data_page_size=1 << 20, version="2.6", write_page_index=False,
                   store_schema=True)
    return bytes(sink.getvalue().to_pybytes())
