"""Durable turn append: threadline versus a raw sqlite3 loop, in the same run.

What is measured
    One *exchange* is a ~500-byte user message plus a ~500-byte reply.

    threadline: ``ingest`` (the user message, committed before any model call) followed by
    ``commit_reply`` (the reply plus its model-call record), called directly on a
    ``SQLiteStore``. The request and the scripted ``Completion`` are built once, outside the
    timed region, so no model time is counted.

    raw: a plain ``sqlite3`` connection with the same pragmas (WAL, the same ``synchronous``
    level, ``isolation_level=None``) doing one ``BEGIN; INSERT; COMMIT`` per row into a table
    keyed ``(conversation_id, seq)`` with a TEXT content column, in two variants:

    ``raw-per-row``  the rows threadline writes for an exchange, one commit each: the user
                     message, the reply, and the model-call record (a JSON row the size of
                     threadline's). Three durable commits per exchange.
    ``raw-2``        only the user message and the reply, one commit each: the same two
                     durable commits threadline makes, so the difference is threadline's own
                     work (hash chain, version check, call record) — the stricter comparison.

    threadline-sql: threadline's own SQL statements for one exchange (captured from a
    threadline exchange: the two transactions, the head read for the version check, the two
    item inserts, the call-record insert), replayed with fresh keys on a database with
    threadline's schema and no threadline code around them. What the schema and statements
    cost by themselves: a ceiling for threadline, whatever its Python does.

How
    For each durability (``full``, ``normal``) both sides get a fresh database in one temporary
    directory and an untimed warm-up; then rounds of ``--round`` exchanges alternate between the
    sides (the side that goes first alternates too), so drift on a noisy machine hits both
    equally. Each exchange is timed with ``perf_counter``. Reported: exchanges/s (exchanges ÷
    summed exchange time), the throughput ratio threadline ÷ raw (target ≥ 0.8), the median of
    the per-round ratios, p50/p99 latency per exchange and the p99 ratio.

    .venv/bin/python bench/append.py            # full size
    .venv/bin/python bench/append.py --quick    # smoke test, a few seconds
    .venv/bin/python bench/append.py --json     # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from threadline.items import utc_now
from threadline.models.calling import CallOutcome
from threadline.models.scripted import ScriptedModel
from threadline.settings import Durability
from threadline.stores.sqlite.store import SQLiteStore
from threadline.turn.assemble import assemble
from threadline.turn.commit import commit_reply
from threadline.turn.ingest import ingest

TARGET_RATIO = 0.8
RAW_SIDES = ("raw-per-row", "raw-2")
MAX_BYTES = 256 * 1024
_SYNC = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}


def text_of(prefix: str, n: int, size: int = 500) -> str:
    """A ``size``-byte ASCII message that differs per exchange."""
    head = f"{prefix} {n}: "
    body = "the quick brown fox jumps over the lazy dog " * (size // 44 + 1)
    return (head + body)[:size]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class ThreadlineSide:
    name = "threadline"

    def __init__(self, path: Path, durability: str) -> None:
        self.store = SQLiteStore(path, durability=Durability(durability))
        first = ingest(self.store, text_of("user", -1), clock=utc_now, max_bytes=MAX_BYTES)
        self.cid = first.conversation_id
        self.request = assemble([first.message])
        reply = ScriptedModel([text_of("reply", 0)]).complete(self.request)
        self.outcome = CallOutcome(started_at=utc_now(), timings=reply.timings,
                                   completion=reply)
        self.n = 0

    def exchange(self) -> float:
        text = text_of("user", self.n)
        self.n += 1
        start = time.perf_counter()
        got = ingest(self.store, text, clock=utc_now, max_bytes=MAX_BYTES,
                     conversation_id=self.cid)
        commit_reply(self.store, head=got.message, branch="main", request=self.request,
                     outcome=self.outcome, model_id="scripted", clock=utc_now)
        return time.perf_counter() - start

    def close(self) -> None:
        self.store.close()


class SqlReplaySide:
    name = "threadline-sql"

    def __init__(self, path: Path, durability: str) -> None:
        side = ThreadlineSide(path, durability)
        for _ in range(3):  # past the first call, whose request has no base to delta against
            side.exchange()
        self.store, self.conn = side.store, side.store._conn  # a benchmark may look inside
        captured: list[tuple[str, tuple[object, ...]]] = []
        execute = side.store._execute

        def spy(sql: str, params: object = ()) -> sqlite3.Cursor:
            captured.append((sql, tuple(params)))  # type: ignore[arg-type]
            return execute(sql, params)  # type: ignore[arg-type]

        side.store._execute = spy  # type: ignore[method-assign]
        side.exchange()
        side.store._execute = execute  # type: ignore[method-assign]
        self.statements: list[tuple[str, tuple[object, ...]]] = [("BEGIN IMMEDIATE", ())]
        for sql, params in captured:
            self.statements.append((sql, params))
            if sql == "COMMIT":
                self.statements.append(("BEGIN IMMEDIATE", ()))
        self.statements.pop()
        self.n = 0

    def exchange(self) -> float:
        self.n += 1
        seq = 10**9 + 2 * self.n
        start = time.perf_counter()
        for sql, params in self.statements:
            if sql.startswith("INSERT INTO items"):  # fresh keys: the next two seqs
                params = (params[0], seq, *params[2:9], None, *params[10:])
                seq += 1
            elif sql.startswith("INSERT INTO model_calls"):
                params = (f"call_replay_{self.n}", *params[1:])
            self.conn.execute(sql, params)
        return time.perf_counter() - start

    def close(self) -> None:
        self.store.close()


class RawSide:
    def __init__(self, path: Path, durability: str, *, record: str | None) -> None:
        self.name = "raw-2" if record is None else "raw-per-row"
        self.record = record
        self.db = sqlite3.connect(path, isolation_level=None)
        assert self.db.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
        self.db.execute(f"PRAGMA synchronous = {_SYNC[durability]}")
        self.db.execute("CREATE TABLE items (conversation_id TEXT NOT NULL, seq INTEGER NOT NULL,"
                        " content TEXT NOT NULL, PRIMARY KEY (conversation_id, seq))")
        self.reply = text_of("reply", 0)
        self.seq = 0

    def _insert(self, text: str) -> None:
        self.seq += 1
        self.db.execute("BEGIN")
        self.db.execute("INSERT INTO items (conversation_id, seq, content) VALUES (?, ?, ?)",
                        ("c_bench", self.seq, text))
        self.db.execute("COMMIT")

    def exchange(self) -> float:
        text = text_of("user", self.seq)
        start = time.perf_counter()
        self._insert(text)
        self._insert(self.reply)
        if self.record is not None:
            self._insert(self.record)
        return time.perf_counter() - start

    def close(self) -> None:
        self.db.close()


def run_durability(durability: str, exchanges: int, round_size: int, warmup: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="tl-bench-append-") as tmp:
        threadline = ThreadlineSide(Path(tmp) / "threadline.db", durability)
        record = call_record_json(threadline)
        sides = [threadline, RawSide(Path(tmp) / "raw2.db", durability, record=None),
                 RawSide(Path(tmp) / "rawrow.db", durability, record=record),
                 SqlReplaySide(Path(tmp) / "replay.db", durability)]
        for side in sides:
            for _ in range(warmup):
                side.exchange()
        times: dict[str, list[float]] = {s.name: [] for s in sides}
        round_ratios = []
        done, r = 0, 0
        while done < exchanges:
            size = min(round_size, exchanges - done)
            order = sides[r % len(sides):] + sides[: r % len(sides)]  # rotate who goes first
            spent = {}
            for side in order:
                batch = [side.exchange() for _ in range(size)]
                times[side.name].extend(batch)
                spent[side.name] = sum(batch)
            round_ratios.append({raw: spent[raw] / spent["threadline"] for raw in RAW_SIDES})
            round_ratios[-1]["ceiling"] = spent["raw-per-row"] / spent["threadline-sql"]
            done, r = done + size, r + 1
        for side in sides:
            side.close()
    out: dict = {"durability": durability, "exchanges_per_side": exchanges, "rounds": r}
    for name, values in times.items():
        out[name] = {"exchanges_per_s": len(values) / sum(values),
                     "p50_ms": percentile(values, 0.50) * 1e3,
                     "p99_ms": percentile(values, 0.99) * 1e3}
    out["ratios"] = {}
    for raw in RAW_SIDES:
        throughput = out["threadline"]["exchanges_per_s"] / out[raw]["exchanges_per_s"]
        out["ratios"][raw] = {
            "throughput_ratio": throughput,
            "median_round_ratio": statistics.median(r[raw] for r in round_ratios),
            "p99_ratio": out["threadline"]["p99_ms"] / out[raw]["p99_ms"],
            "target_met": throughput >= TARGET_RATIO}
    ceiling = out["threadline-sql"]["exchanges_per_s"] / out["raw-per-row"]["exchanges_per_s"]
    out["ceiling"] = {"throughput_ratio": ceiling,
                      "median_round_ratio": statistics.median(r["ceiling"] for r in round_ratios)}
    return out


def call_record_json(side: ThreadlineSide) -> str:
    """A JSON row the size of the model-call record threadline stores per exchange."""
    completion = side.outcome.completion
    assert completion is not None
    return json.dumps({"request": completion.sent.to_json(), "response":
                       completion.response_json(), "usage": completion.usage.to_json()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=1500, help="per side per durability")
    parser.add_argument("--round", type=int, default=100, help="exchanges per alternating round")
    parser.add_argument("--warmup", type=int, default=20, help="untimed exchanges per side")
    parser.add_argument("--durability", default="full,normal", help="comma-separated list")
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.quick:
        args.exchanges, args.round, args.warmup = 60, 20, 5
    levels = [d.strip() for d in args.durability.split(",") if d.strip()]
    for level in levels:
        if level not in _SYNC:
            parser.error(f"unknown durability {level!r}; choose from {', '.join(_SYNC)}")
    results = [run_durability(d, args.exchanges, args.round, args.warmup) for d in levels]
    report = {"benchmark": "append", "sqlite_version": sqlite3.sqlite_version,
              "python": sys.version.split()[0], "target_ratio": TARGET_RATIO,
              "results": results}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"durable append: ingest + commit_reply of a ~1 KB exchange vs raw sqlite3 "
          f"(SQLite {sqlite3.sqlite_version})")
    print(f"{'durability':<10} {'side':<14} {'exch/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for res in results:
        for name in ("threadline", *RAW_SIDES, "threadline-sql"):
            row = res[name]
            print(f"{res['durability']:<10} {name:<14} {row['exchanges_per_s']:>9.0f} "
                  f"{row['p50_ms']:>8.3f} {row['p99_ms']:>8.3f}")
        for raw, ratio in res["ratios"].items():
            verdict = "met" if ratio["target_met"] else "MISSED"
            print(f"{'':<10} threadline/{raw}: throughput {ratio['throughput_ratio']:.2f} "
                  f"(median per round {ratio['median_round_ratio']:.2f}; target >= "
                  f"{TARGET_RATIO}: {verdict}), p99 ratio {ratio['p99_ratio']:.2f}")
        ceiling = res["ceiling"]
        print(f"{'':<10} ceiling: threadline's SQL alone / raw-per-row: throughput "
              f"{ceiling['throughput_ratio']:.2f} (median per round "
              f"{ceiling['median_round_ratio']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
