"""Audit export throughput: ``threadline audit export`` of a ShareGPT replay log against a bare
pyarrow write of the same rows already in memory, in one run.

What is measured
    The log: every conversation of ``../shared/data/sharegpt-sample-1000`` replayed turn by
    turn through ``Engine.run_turn`` into a SQLite file, the scripted model answering with the
    recorded reply, so each turn has its items, its model call (the exact request, stored as
    a delta) and its prefix report. Building it is not timed.

    export  ``audit.export`` into an empty directory: reading the log by day (items, calls,
            each exact request rebuilt from its deltas), building the rows, pricing every call,
            encoding each file, its sha256, writing it and the manifest.
    bare    the same rows, already built and in memory, written by pyarrow alone with the same
            writer settings (``pa.Table.from_pydict`` and ``pq.write_table``, zstd level 3), one
            file per table and day: the floor any Parquet export pays.

    Reported: rows/s of each and their ratio (export ÷ bare; target ≥ 0.5), and bytes per turn
    of the export's files (every table, with content). Rows count every table's rows.

    The first export runs in a process where pyarrow has written nothing yet, and pays its
    first-use costs (its allocator's first large buffers above all); the bare write, run after
    it, does not. So each is then run again, alternately (``--warm`` rounds, into fresh
    directories), and the median of those is reported too, both arms warm: ``ratio`` is the
    first run's, ``warm_ratio`` the rounds'. ``cpu_ratio`` and ``warm_cpu_ratio`` are the same
    ratios in CPU seconds (the bare write's over the export's, the two writing the same rows),
    which other work on a shared machine moves less than it moves the wall clock.

    .venv/bin/python bench/audit_export.py                 # all 1,000 conversations
    .venv/bin/python bench/audit_export.py --limit 200     # a sample
    .venv/bin/python bench/audit_export.py --quick --json  # smoke test
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from threadline.audit import ExportOptions, Pricing, export, open_target
from threadline.audit.export import day_start
from threadline.audit.rows import Entries, day_rows
from threadline.audit.tables import ROW_GROUP_ROWS, TABLES
from threadline.cache.pricing import profile
from threadline.engine import Engine
from threadline.interop.importers import ImportRecord, read_records
from threadline.items import ItemKind, NewItem, utc_now
from threadline.models.scripted import ScriptedModel
from threadline.stores.sqlite import SQLiteStore

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "sharegpt-sample-1000"
TARGET = 0.5
MAX_BYTES = 4 * 2**20


def _tiny() -> list[tuple[str | None, list[NewItem]]]:
    return [(None, [x for n in range(4) for x in (NewItem.user(f"Question {n} of {c}?"),
                                                  NewItem.assistant("An answer. " * 20))])
            for c in range(5)]


def replay_log(store: SQLiteStore, conversations: list[tuple[str | None, list[NewItem]]]
               ) -> int:
    """Each conversation's user messages as turns, answered with its recorded replies."""
    turns = 0
    model = ScriptedModel()
    for system, items in conversations:
        engine = Engine(store, model, system=system, max_message_bytes=MAX_BYTES)
        cid = None
        for n, item in enumerate(items):
            text = item.content.get("text", "")
            if item.kind is not ItemKind.USER or not text.strip():
                continue
            following = items[n + 1] if n + 1 < len(items) else None
            reply = following.content["text"] if following is not None and \
                following.kind is ItemKind.ASSISTANT and following.content["text"].strip() \
                else "(no reply recorded)"
            model.enqueue(reply)
            cid = engine.run_turn(text, conversation_id=cid).conversation_id
            turns += 1
    return turns


def bare_write(store: SQLiteStore, options: ExportOptions, out: Path
               ) -> tuple[int, float, float, int]:
    """The export's rows built (untimed), then written by pyarrow alone (timed): rows, wall
    and CPU seconds, bytes."""
    audit = store.audit
    today = utc_now().date()
    built = []
    for day in (today - timedelta(days=1), today):
        start, end = day_start(day), day_start(day + timedelta(days=1))
        rows = day_rows(audit, start, end, options.pricing, {}, Entries(store))
        # each row as a dict, as the export built them before its rows were tuples, so this
        # arm's timed work (a lookup a cell, then pyarrow) is what it has always been
        built.append((day, {name: [r if isinstance(r, dict) else dict(zip(TABLES[name].names,
                                                                          r, strict=True))
                                   for r in table_rows]
                            for name, table_rows in rows.items()}))
    count = sum(len(r) for _, tables in built for r in tables.values())
    started, cpu = time.perf_counter(), time.process_time()
    for day, tables in built:
        for name, table_rows in tables.items():
            if not table_rows:
                continue
            schema = TABLES[name].schema(content=True)
            data = pa.Table.from_pydict({c: [r.get(c) for r in table_rows]
                                         for c in schema.names}, schema=schema)
            pq.write_table(data, out / f"{name}-{day}.parquet", row_group_size=ROW_GROUP_ROWS,
                           compression="zstd", compression_level=3)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return count, elapsed, cpu, sum(p.stat().st_size for p in out.iterdir())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA / "sharegpt_sample_1000.jsonl")
    parser.add_argument("--limit", type=int, help="replay at most this many conversations")
    parser.add_argument("--quick", action="store_true", help="built-in sample")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--warm", type=int, default=3,
                        help="rounds of each arm after the first, both warm (default 3)")
    args = parser.parse_args(argv)
    if args.quick:
        conversations = _tiny()
    else:
        if not args.data.exists():
            parser.error(f"{args.data} not found (the shared data folder sits next to the repo)")
        records = [r for r in read_records(args.data.read_bytes(), "sharegpt",
                                           max_message_bytes=MAX_BYTES)
                   if isinstance(r, ImportRecord)]
        conversations = [(r.system, r.items) for r in records[: args.limit]]
    options = ExportOptions(Pricing(profile("anthropic-5m"), 3.0))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = SQLiteStore(root / "replay.db")
        started = time.perf_counter()
        turns = replay_log(store, conversations)
        built_s = time.perf_counter() - started
        started, cpu = time.perf_counter(), time.process_time()
        result = export(store, open_target(str(root / "audit")), options)
        export_s, export_cpu = time.perf_counter() - started, time.process_time() - cpu
        exported = sum(p.stat().st_size for p in (root / "audit").rglob("*.parquet"))
        (root / "bare").mkdir()
        bare_rows, bare_s, bare_cpu, bare_bytes = bare_write(store, options, root / "bare")
        warm_export, warm_bare, warm_cpu = [], [], []
        for n in range(args.warm):
            started, cpu = time.perf_counter(), time.process_time()
            export(store, open_target(str(root / f"audit-{n}")), options)
            warm_export.append(time.perf_counter() - started)
            export_n_cpu = time.process_time() - cpu
            (root / f"bare-{n}").mkdir()
            _, bare_n_s, bare_n_cpu, _ = bare_write(store, options, root / f"bare-{n}")
            warm_bare.append(bare_n_s)
            warm_cpu.append(bare_n_cpu / export_n_cpu)
        store.close()
    rows = sum(result.rows.values())
    export_rate, bare_rate = rows / export_s, bare_rows / bare_s
    report = {"benchmark": "audit_export", "conversations": len(conversations),
              "turns": turns, "log_build_s": round(built_s, 2), "rows": result.rows,
              "rows_total": rows, "export_s": round(export_s, 3),
              "export_rows_per_s": round(export_rate), "bare_rows": bare_rows,
              "bare_s": round(bare_s, 3), "bare_rows_per_s": round(bare_rate),
              "ratio": round(export_rate / bare_rate, 3), "target": TARGET,
              "target_met": export_rate / bare_rate >= TARGET,
              "export_bytes": exported, "bytes_per_turn": round(exported / max(turns, 1)),
              "bare_bytes": bare_bytes, "files": result.written,
              # CPU seconds (every thread): on a shared machine, less moved by the others
              "export_cpu_s": round(export_cpu, 3), "bare_cpu_s": round(bare_cpu, 3),
              "cpu_ratio": round(bare_cpu / export_cpu, 3)}
    if warm_export:
        export_warm, bare_warm = statistics.median(warm_export), statistics.median(warm_bare)
        report |= {"warm_rounds": args.warm, "warm_export_s": [round(t, 3) for t in warm_export],
                   "warm_bare_s": [round(t, 3) for t in warm_bare],
                   "warm_export_rows_per_s": round(rows / export_warm),
                   "warm_bare_rows_per_s": round(bare_rows / bare_warm),
                   "warm_ratio": round(rows / export_warm / (bare_rows / bare_warm), 3),
                   "warm_cpu_ratio": round(statistics.median(warm_cpu), 3)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{len(conversations)} conversations, {turns:,} turns replayed in {built_s:.0f} s; "
          f"{rows:,} rows ({', '.join(f'{n:,} {t}' for t, n in result.rows.items())})")
    print(f"export: {export_s:.2f} s, {export_rate:,.0f} rows/s, {exported:,} bytes "
          f"({exported / max(turns, 1):,.0f} per turn) in {result.written} files")
    print(f"bare pyarrow write of the same rows: {bare_s:.2f} s, {bare_rate:,.0f} rows/s")
    verdict = "met" if report["target_met"] else "MISSED"
    print(f"export ÷ bare: {report['ratio']:.3f} (target >= {TARGET}: {verdict}); in CPU "
          f"seconds {report['cpu_ratio']:.3f} ({export_cpu:.2f} against {bare_cpu:.2f})")
    if warm_export:
        verdict = "met" if report["warm_ratio"] >= TARGET else "MISSED"
        print(f"both warm, median of {args.warm} rounds: export {export_warm:.2f} s, bare "
              f"{bare_warm:.2f} s, export ÷ bare {report['warm_ratio']:.3f} "
              f"(target >= {TARGET}: {verdict}); in CPU seconds {report['warm_cpu_ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
