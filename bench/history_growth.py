"""Store overhead per turn as a conversation grows, and a comparison with LangGraph.

Part 1: growth. For each length L (default 10, 1,000 and 10,000 turns) a conversation of L
turns (~500-byte user message + ~500-byte reply) is bulk-written through ``store.commit`` into
its own SQLite file at durability ``off``, then reopened at the default ``full`` (or at
``--durability``: ``off`` times the CPU's share alone, without the fsync). After a few
untimed warm-up turns, M turns are run per length, interleaved across lengths in rounds (the
order rotates each round). Per turn, timed separately with ``perf_counter``:

  store cost     ``ingest`` + ``commit_reply`` (the reply and its model-call record, whose
                 request is the full assembled request for that history). Target: the cost at
                 10,000 turns ≤ 1.3 × the cost at 10 turns (median vs median).
  history cost   ``store.history()`` + ``assemble()``. Not part of the store target. The
                 assembler folds in only what the turn appended (``MessageMemo``), and the
                 history's sequences are shared with the turn before, not copied.
  prefix report  comparing the request with the previous call's (``cache.attribution``), which
                 the engine does before committing. Also not part of the target; like the
                 store's delta it confirms the shared history by its chained hashes, so it
                 costs what the turn added.

The request is recorded in two shapes, each its own run: ``messages`` (provider-shaped
messages only, as an HTTP backend records a call) and ``rendered`` (messages plus the rendered
prompt text, as llama.cpp and the scripted model record it; at 10,000 turns that prompt is
~10 MB). The scripted model's ``complete`` runs outside both timings. The first call on a
history with no recorded call yet has no base request to delta against, so its request is
stored whole; that happens in the warm-up and is reported apart. Bytes on disk are database + WAL
after ``PRAGMA wal_checkpoint(TRUNCATE)``: in total per turn, and the growth per timed turn.

Part 2: LangGraph. The same N turns (default 500) on one thread, alternating turn by turn:
threadline ``Engine(store, ScriptedModel()).run_turn`` on a file DB at durability ``full``, and a
LangGraph ``StateGraph(MessagesState)`` with one node appending one AIMessage (the scripted
model's echo reply), compiled with ``SqliteSaver`` on a file DB and invoked with
``durability="sync"``. Reported: time per turn (all N, last 100), the threadline time without
the scripted model's own time, and bytes on disk, with ratios.

Part 3 (``--whole-turn``): ``Engine.run_turn`` with the scripted model on a conversation
bulk-built to each length, the whole turn as a user sees it, median ms, the lengths
interleaved in rounds as in part 1; the same target applies to its ratio.

    .venv/bin/python bench/history_growth.py            # full size
    .venv/bin/python bench/history_growth.py --quick    # smoke test, a few seconds
    .venv/bin/python bench/history_growth.py --json     # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from threadline.cache.attribution import Previous, report
from threadline.engine import Engine
from threadline.items import NewItem, new_id, utc_now
from threadline.models.calling import CallOutcome
from threadline.models.scripted import ScriptedModel
from threadline.settings import Durability
from threadline.stores.base import Commit, NewConversation
from threadline.stores.sqlite.store import SQLiteStore
from threadline.turn.assemble import MessageMemo, assemble
from threadline.turn.commit import commit_reply
from threadline.turn.ingest import ingest

TARGET_RATIO = 1.3
MAX_BYTES = 256 * 1024


def text_of(prefix: str, n: int, size: int = 500) -> str:
    body = "the quick brown fox jumps over the lazy dog " * (size // 44 + 1)
    return (f"{prefix} {n}: " + body)[:size]


def disk_bytes(path: Path) -> int:
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    db.close()
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def build(path: Path, turns: int, batch_turns: int = 500) -> str:
    """A conversation of ``turns`` turns, written in large commits at durability off."""
    store = SQLiteStore(path, durability=Durability.OFF)
    cid, head, done = new_id("c_"), None, 0
    while done < turns:
        n = min(batch_turns, turns - done)
        items = [x for i in range(done, done + n) for x in
                 (NewItem.user(text_of("user", i)), NewItem.assistant(text_of("reply", i)))]
        result = store.commit(Commit(
            conversation_id=cid, created_at=utc_now(), expected_head=head, items=items,
            create=NewConversation(cid) if head is None else None))
        head, done = result.items[-1].seq, done + n
    store.close()
    return cid


def one_turn(store: SQLiteStore, cid: str, n: int, memo: MessageMemo | None = None,
             shape: str = "rendered", previous: list[Previous] | None = None,
             model: ScriptedModel | None = None) -> tuple[float, float, float]:
    """(store, history+assemble, prefix report) seconds of one turn; the model is not timed.
    ``memo`` is the per-engine message memo the Engine passes to assemble, ``model`` the
    engine's model (which renders each request on the previous one's parts); ``previous``
    holds the last call, which the prefix report compares against."""
    t0 = time.perf_counter()
    got = ingest(store, text_of("user", n), clock=utc_now, max_bytes=MAX_BYTES,
                 conversation_id=cid)
    t1 = time.perf_counter()
    request = assemble(store.history(cid), system=None, memo=memo)
    t2 = time.perf_counter()
    model = model or ScriptedModel()
    model.enqueue(text_of("reply", n))
    completion = model.complete(request)
    if shape == "messages":  # as an HTTP backend records a call: messages only
        completion = replace(completion, sent=replace(completion.sent, rendering=None))
    outcome = CallOutcome(started_at=utc_now(), timings=completion.timings, completion=completion)
    t3 = time.perf_counter()
    prefix = report(completion.sent, request, previous[-1] if previous else None)
    t4 = time.perf_counter()
    _, call = commit_reply(store, head=got.message, branch="main", request=request,
                           outcome=outcome, model_id="scripted", clock=utc_now,
                           prefix=prefix.to_json())
    t5 = time.perf_counter()
    if previous is not None:
        previous[:] = [Previous(call.id, completion.sent, prefix.layout)]
    return (t1 - t0) + (t5 - t4), t2 - t1, t4 - t3


def growth(tmp: Path, lengths: list[int], turns: int, warmup: int, round_size: int,
           shape: str, durability: Durability = Durability.FULL) -> dict:
    runs = {}
    for length in lengths:
        path = tmp / f"growth-{shape}-{length}.db"
        cid = build(path, length)
        built = disk_bytes(path)
        store = SQLiteStore(path, durability=durability)
        memo, previous, model = MessageMemo(), [], ScriptedModel()
        first = [one_turn(store, cid, length + i, memo, shape, previous, model)[0]
                 for i in range(warmup)]
        runs[length] = {"path": path, "cid": cid, "store": store, "memo": memo, "model": model,
                        "previous": previous, "store_s": [], "report_s": [],
                        "history_s": [], "before": disk_bytes(path), "built": built,
                        "first": first[0] if first else None}
    for r, start in enumerate(range(0, turns, round_size)):
        order = lengths[r % len(lengths):] + lengths[:r % len(lengths)]
        for length in order:
            run = runs[length]
            for i in range(start, min(start + round_size, turns)):
                store_s, history_s, report_s = one_turn(
                    run["store"], run["cid"], length + warmup + i, run["memo"], shape,
                    run["previous"], run["model"])
                run["store_s"].append(store_s)
                run["report_s"].append(report_s)
                run["history_s"].append(history_s)
    out = {}
    for length, run in runs.items():
        run["store"].close()
        after = disk_bytes(run["path"])
        out[str(length)] = {
            "store_median_ms": statistics.median(run["store_s"]) * 1e3,
            "store_p90_ms": statistics.quantiles(run["store_s"], n=10)[-1] * 1e3,
            "history_assemble_median_ms": statistics.median(run["history_s"]) * 1e3,
            "prefix_report_median_ms": statistics.median(run["report_s"]) * 1e3,
            "bytes_per_turn_total": after / (length + warmup + turns),
            "bytes_per_timed_turn": (after - run["before"]) / turns,
            # the first call on a history that has no recorded call yet stores its request
            # whole (no base to delta against): reported, but kept out of the timed turns
            "first_warmup_store_ms": None if run["first"] is None else run["first"] * 1e3,
            "warmup_bytes": run["before"] - run["built"]}
    lo, hi = out[str(min(lengths))], out[str(max(lengths))]
    ratio = hi["store_median_ms"] / lo["store_median_ms"]
    return {"shape": shape, "durability": str(durability), "turns_timed": turns,
            "warmup": warmup, "by_length": out,
            "store_ratio_longest_vs_shortest": ratio, "target_met": ratio <= TARGET_RATIO}


class TimedModel(ScriptedModel):
    """The scripted model, keeping the seconds spent inside ``complete``."""

    spent = 0.0

    def complete(self, request, *, on_text=None):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return super().complete(request, on_text=on_text)
        finally:
            self.spent += time.perf_counter() - start


def versus_langgraph(tmp: Path, turns: int) -> dict:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, MessagesState, StateGraph

    def reply(state: MessagesState) -> dict:  # the scripted model's echo_reply, verbatim
        users = [m for m in state["messages"] if isinstance(m, HumanMessage)]
        last = " ".join(users[-1].content.split())[:200]
        return {"messages": [AIMessage(f"(scripted reply {len(users)}) You said: {last}")]}

    conn = sqlite3.connect(tmp / "langgraph.db", check_same_thread=False)
    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    graph = builder.compile(checkpointer=SqliteSaver(conn))
    config = {"configurable": {"thread_id": "bench"}}
    model = TimedModel()
    store = SQLiteStore(tmp / "threadline-engine.db")
    engine = Engine(store, model)
    cid = engine.run_turn(text_of("user", -1)).conversation_id  # untimed: creates it
    graph.invoke({"messages": [HumanMessage(text_of("user", -1))]}, config, durability="sync")
    times: dict[str, list[float]] = {"threadline": [], "langgraph": [], "model": []}
    for i in range(turns):
        sides = ["threadline", "langgraph"] if i % 2 == 0 else ["langgraph", "threadline"]
        for side in sides:
            text, before = text_of("user", i), model.spent
            start = time.perf_counter()
            if side == "threadline":
                engine.run_turn(text, conversation_id=cid)
            else:
                graph.invoke({"messages": [HumanMessage(text)]}, config, durability="sync")
            times[side].append(time.perf_counter() - start)
            if side == "threadline":
                times["model"].append(model.spent - before)
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    conn.close()
    store.close()
    out: dict = {"turns": turns, "langgraph_synchronous": sync}
    last = min(100, turns)
    ex_model = [t - m for t, m in zip(times["threadline"], times["model"], strict=True)]
    for name, values in (("threadline", times["threadline"]), ("langgraph", times["langgraph"]),
                         ("threadline_without_model", ex_model)):
        out[name] = {"mean_ms_all": statistics.fmean(values) * 1e3,
                     "mean_ms_last100": statistics.fmean(values[-last:]) * 1e3}
    out["threadline"]["bytes"] = disk_bytes(tmp / "threadline-engine.db")
    out["langgraph"]["bytes"] = disk_bytes(tmp / "langgraph.db")
    for key in ("mean_ms_all", "mean_ms_last100"):
        out[f"ratio_{key}"] = out["threadline"][key] / out["langgraph"][key]
    out["ratio_bytes"] = out["threadline"]["bytes"] / out["langgraph"]["bytes"]
    return out


def whole_turn(tmp: Path, lengths: list[int], turns: int, warmup: int, round_size: int,
               durability: Durability) -> dict:
    """Part 3: ``Engine.run_turn`` (the scripted model) on a conversation bulk-built to each
    length, as a user sees the turn: median ms over ``turns`` turns, the lengths interleaved
    in rounds as in part 1 (so a burst of load on a shared machine hits each alike)."""
    runs = {}
    for length in lengths:
        path = tmp / f"whole-{length}.db"
        cid = build(path, length)
        store = SQLiteStore(path, durability=durability)
        engine = Engine(store, ScriptedModel())
        for i in range(warmup + 1):  # the first stores its request whole (no base yet)
            engine.run_turn(text_of("user", length + i), conversation_id=cid)
        runs[length] = {"store": store, "engine": engine, "cid": cid, "times": []}
    for r, start in enumerate(range(0, turns, round_size)):
        order = lengths[r % len(lengths):] + lengths[:r % len(lengths)]
        for length in order:
            run = runs[length]
            for i in range(start, min(start + round_size, turns)):
                began = time.perf_counter()
                run["engine"].run_turn(text_of("user", length + warmup + 1 + i),
                                       conversation_id=run["cid"])
                run["times"].append(time.perf_counter() - began)
    out = {}
    for length, run in runs.items():
        run["store"].close()
        out[str(length)] = statistics.median(run["times"]) * 1e3
    lo, hi = out[str(min(lengths))], out[str(max(lengths))]
    return {"durability": str(durability), "turns_timed": turns, "median_ms": out,
            "ratio_longest_vs_shortest": hi / lo, "target_met": hi / lo <= TARGET_RATIO}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="10,1000,10000", help="comma-separated turns")
    parser.add_argument("--turns", type=int, default=40, help="timed turns per length")
    parser.add_argument("--warmup", type=int, default=2, help="untimed turns per length")
    parser.add_argument("--round", type=int, default=5, help="turns per length per round")
    parser.add_argument("--lg-turns", type=int, default=500, help="turns in the LangGraph part")
    parser.add_argument("--shapes", default="messages,rendered",
                        help="request shapes to record: messages, rendered, or both")
    parser.add_argument("--durability", default="full", choices=[str(d) for d in Durability],
                        help="of the timed turns (off: the CPU cost alone, without fsync)")
    parser.add_argument("--no-langgraph", action="store_true", help="skip part 2")
    parser.add_argument("--whole-turn", action="store_true",
                        help="also time Engine.run_turn at each length (part 3)")
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.quick:
        args.lengths, args.turns, args.warmup, args.round, args.lg_turns = "10,200", 6, 1, 2, 20
    lengths = sorted(int(x) for x in args.lengths.split(","))
    report: dict = {"benchmark": "history_growth", "sqlite_version": sqlite3.sqlite_version,
                    "target_ratio": TARGET_RATIO}
    with tempfile.TemporaryDirectory(prefix="tl-bench-growth-") as tmp:
        report["growth"] = [growth(Path(tmp), lengths, args.turns, args.warmup, args.round,
                                   shape, Durability(args.durability))
                            for shape in args.shapes.split(",")]
        if args.whole_turn:
            report["whole_turn"] = whole_turn(Path(tmp), lengths, args.turns, args.warmup,
                                              args.round, Durability(args.durability))
        try:
            if not args.no_langgraph:
                report["langgraph"] = versus_langgraph(Path(tmp), args.lg_turns)
        except ImportError as err:  # pip install -e '.[bench]'
            report["langgraph_skipped"] = f"LangGraph is not installed ({err})"
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for g in report["growth"]:
        print(f"store overhead per turn (ingest + commit_reply + call record), durability "
              f"{g['durability']}, {g['turns_timed']} timed turns per length, request shape: "
              f"{g['shape']}")
        print(f"{'turns':>7} {'median ms':>10} {'p90 ms':>8} {'B/turn total':>13} "
              f"{'B/timed turn':>13} | not in target: {'history+assemble ms':>19} "
              f"{'prefix report ms':>16}")
        for length, row in g["by_length"].items():
            print(f"{length:>7} {row['store_median_ms']:>10.3f} {row['store_p90_ms']:>8.3f} "
                  f"{row['bytes_per_turn_total']:>13.0f} {row['bytes_per_timed_turn']:>13.0f} |"
                  f" {'':>14} {row['history_assemble_median_ms']:>19.3f} "
                  f"{row['prefix_report_median_ms']:>16.3f}")
        for length, row in g["by_length"].items():
            if row["first_warmup_store_ms"] is not None:
                print(f"  {length}: first (warm-up) call, request stored whole: store "
                      f"{row['first_warmup_store_ms']:.1f} ms, warm-up {row['warmup_bytes']} B")
        verdict = "met" if g["target_met"] else "MISSED"
        print(f"ratio longest/shortest store cost: {g['store_ratio_longest_vs_shortest']:.2f} "
              f"(target <= {TARGET_RATIO}: {verdict})\n")
    if "whole_turn" in report:
        w = report["whole_turn"]
        verdict = "met" if w["target_met"] else "MISSED"
        print(f"Engine.run_turn, durability {w['durability']}, median of {w['turns_timed']} "
              "turns: " + ", ".join(f"{n} turns {ms:.3f} ms" for n, ms in w["median_ms"].items())
              + f"; ratio longest/shortest {w['ratio_longest_vs_shortest']:.2f} "
              f"(target <= {TARGET_RATIO}: {verdict})")
    if "langgraph_skipped" in report:
        print(report["langgraph_skipped"])
    if "langgraph" in report:
        lg = report["langgraph"]
        print(f"\nthreadline Engine.run_turn vs LangGraph SqliteSaver, {lg['turns']} turns, "
              f"one conversation/thread (LangGraph synchronous={lg['langgraph_synchronous']})")
        print(f"{'side':<26} {'ms/turn all':>12} {'ms/turn last100':>16} {'bytes':>12}")
        for name in ("threadline", "threadline_without_model", "langgraph"):
            row = lg[name]
            print(f"{name:<26} {row['mean_ms_all']:>12.3f} {row['mean_ms_last100']:>16.3f} "
                  f"{row.get('bytes', ''):>12}")
        print(f"ratio threadline/langgraph: time all {lg['ratio_mean_ms_all']:.2f}, "
              f"last 100 {lg['ratio_mean_ms_last100']:.2f}, bytes {lg['ratio_bytes']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
