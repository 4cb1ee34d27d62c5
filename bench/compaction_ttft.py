"""Time to first token around a compaction, with the real local model.

A conversation (user messages of ~55 tokens, the model's own greedy replies of up to 40 tokens)
is driven through ``Engine.run_turn`` with SmolLM2-135M in llama.cpp on an SQLite store. After
``--compact-after`` turns the branch is compacted (``Compaction.compact`` to ``--budget`` tokens,
the lightest strategy that gets there: a recall-first summary here), then the conversation goes
on. Per turn the engine's own call record gives TTFT, prompt and cached tokens, and the prefix
report (reused ÷ the best an append-only prefix could reuse).

Reported: median TTFT over the turns just before the compaction, TTFT on the first and second
turns after it, the prompt size before and after, whether the reset was reported as expected,
and whether reuse is back at the theoretical best by the second turn after it (target).

    .venv/bin/python bench/compaction_ttft.py
    .venv/bin/python bench/compaction_ttft.py --quick --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from ttft_local import SYSTEM, user_text  # the same conversation as the TTFT benchmark

from threadline.compaction.auto import Compaction
from threadline.engine import Engine
from threadline.models.llamacpp import LlamaCppModel, Sampling
from threadline.stores.sqlite import SQLiteStore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=18)
    parser.add_argument("--compact-after", type=int, default=14)
    parser.add_argument("--budget", type=int, default=600, help="tokens after compacting")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.compact_after, args.budget = 6, 4, 250
    if not 2 <= args.compact_after <= args.turns - 2:
        parser.error("--compact-after must leave at least two turns on each side")
    model = LlamaCppModel(sampling=Sampling(max_tokens=40, temperature=0.0, seed=1))
    rows, compaction = [], None
    with tempfile.TemporaryDirectory(prefix="tl-bench-compact-") as tmp:
        store = SQLiteStore(Path(tmp) / "threadline.db")
        engine = Engine(store, model, system=SYSTEM)
        cid = None
        for n in range(1, args.turns + 1):
            result = engine.run_turn(user_text(n), conversation_id=cid)
            cid = result.conversation_id
            call, prefix = result.call, result.call.prefix or {}
            rows.append({"turn": n, "ttft_ms": call.timings.ttft_ms,
                         "prompt_tokens": call.usage.prompt_tokens,
                         "cached_tokens": call.usage.cached_tokens,
                         "cause": prefix.get("cause"), "expected": prefix.get("expected"),
                         "reuse_vs_best": prefix["ratio"] / prefix["best_ratio"]
                         if prefix.get("best_ratio") else None})
            if not args.json:
                print(f"turn {n:>2}: {call.usage.prompt_tokens:>5} prompt tokens, "
                      f"{call.usage.cached_tokens:>5} cached, TTFT "
                      f"{call.timings.ttft_ms or 0:8.1f} ms, {prefix.get('cause')}",
                      file=sys.stderr)
            if n == args.compact_after:
                done = Compaction().compact(engine, cid, budget=args.budget)
                compaction = done.to_json()
                if not args.json:
                    print(f"compacted: {done.detail}", file=sys.stderr)
        store.close()
    before = rows[args.compact_after - 3: args.compact_after]
    first, second = rows[args.compact_after], rows[args.compact_after + 1]
    report = {
        "benchmark": "compaction_ttft", "model": model.model_id, "threads": model.threads,
        "compaction": compaction, "turns": rows,
        "ttft_ms_before_median": statistics.median(r["ttft_ms"] for r in before),
        "ttft_ms_first_after": first["ttft_ms"], "ttft_ms_second_after": second["ttft_ms"],
        "prompt_tokens_before": rows[args.compact_after - 1]["prompt_tokens"],
        "prompt_tokens_first_after": first["prompt_tokens"],
        "reset_reported_expected": first["cause"] == "compaction_reset" and first["expected"],
        "reuse_vs_best_second_after": second["reuse_vs_best"],
        "target_met": bool(second["reuse_vs_best"] is not None
                           and second["reuse_vs_best"] >= 0.99
                           and first["cause"] == "compaction_reset")}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"TTFT before (median of 3): {report['ttft_ms_before_median']:.1f} ms · first turn "
          f"after: {first['ttft_ms']:.1f} ms · second after: {second['ttft_ms']:.1f} ms")
    print(f"prompt tokens {report['prompt_tokens_before']} → {first['prompt_tokens']}; reset "
          f"reported as {first['cause']} (expected: {first['expected']}); reuse vs best on "
          f"the second turn after: {second['reuse_vs_best']:.3f}")
    print(f"target met: {report['target_met']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
