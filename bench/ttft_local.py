"""Time to first token with the real local model: a stable prefix against a clock in the system
prompt, and against the floor of prefilling only the new tokens.

A 20-turn conversation (fixed user messages of ~55 tokens; the model's own replies, greedy, up
to 40 tokens; about 2,000 tokens by the end) is driven through SmolLM2-135M in llama.cpp. Each
side has its own model instance, so each keeps its own KV cache; the sides alternate turn by
turn and all see the same conversation (threadline's replies):

  threadline        the assembler as shipped, no clock (the default)
  threadline+clock  the current time in the tail of the turn, where threadline puts it
  timestamp         the current time stamped into the system prompt (the common mistake)
  floor             raw llama.cpp on threadline's own tokens: evaluate the part threadline's
                    call found cached (untimed), then time only the prefill of the rest and
                    the first sampled token

Reported: median TTFT over the last turns; threadline ÷ timestamp (target: threadline ≥ 10×
faster) and threadline ÷ floor (target: within 1.2×); the same for threadline+clock.

    .venv/bin/python bench/ttft_local.py            # 20 turns
    .venv/bin/python bench/ttft_local.py --quick    # 4 turns
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

from threadline.items import Item, ItemKind, chain_hash
from threadline.models.llamacpp import LlamaCppModel, Sampling
from threadline.request import TailBlock
from threadline.turn.assemble import MessageMemo, assemble

SYSTEM = "You are a careful assistant for a travel agency. Answer briefly and precisely."
T0 = datetime(2026, 5, 3, 9, 0, tzinfo=UTC)
SAMPLING = Sampling(max_tokens=40, temperature=0.0, seed=1)


def user_text(n: int) -> str:
    return (f"Turn {n}: please check the itinerary for passenger {n}, flight TP{100 + n}, "
            f"departing Lisbon at {8 + n % 10}:15, and confirm the baggage allowance, the "
            "seat, and whether the fare can be changed.")


def item(items: list[Item], kind: ItemKind, text: str, turn: int) -> None:
    parent = items[-1].hash if items else None
    content = {"text": text}
    items.append(Item("c_b", len(items) + 1, "main", len(items) or None, turn, kind, content,
                      chain_hash(parent, kind, content), T0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--last", type=int, default=5, help="turns the medians are taken over")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.last = 4, 2
    ours, clocked, stamped, floor_model = (LlamaCppModel(sampling=SAMPLING) for _ in range(4))
    llm = floor_model._llm
    memo = MessageMemo()
    history: list[Item] = []
    rows = []
    for n in range(1, args.turns + 1):
        item(history, ItemKind.USER, user_text(n), n)
        now = (T0 + timedelta(seconds=61 * n)).strftime("%Y-%m-%d %H:%M:%S")
        a = ours.complete(assemble(history, system=SYSTEM, memo=memo))
        c = clocked.complete(assemble(history, system=SYSTEM, tail=[TailBlock("time", now)],
                                      memo=memo))
        b = stamped.complete(assemble(history, system=f"Current time: {now}\n{SYSTEM}",
                                      memo=memo))
        item(history, ItemKind.ASSISTANT, a.text, n)
        # the floor: the same tokens, the same cached prefix, nothing but llama.cpp
        assert a.sent.tokens is not None
        tokens, cached = list(a.sent.tokens), a.usage.cached_tokens
        llm.reset()
        llm.eval(tokens[:cached])  # untimed: the cache the previous turn left
        started = time.perf_counter()
        llm.eval(tokens[cached:])
        llm.sample(temp=0.0)
        floor_ms = (time.perf_counter() - started) * 1000
        rows.append({"turn": n, "prompt_tokens": a.usage.prompt_tokens,
                     "threadline_cached": a.usage.cached_tokens,
                     "threadline_ttft_ms": a.timings.ttft_ms,
                     "clock_cached": c.usage.cached_tokens, "clock_ttft_ms": c.timings.ttft_ms,
                     "timestamp_cached": b.usage.cached_tokens,
                     "timestamp_ttft_ms": b.timings.ttft_ms,
                     "floor_new_tokens": len(tokens) - cached, "floor_ms": floor_ms})
        if not args.json:
            r = rows[-1]
            print(f"turn {n:>2}: {r['prompt_tokens']:>5} tok | threadline "
                  f"{r['threadline_ttft_ms']:>7.1f} ms ({r['threadline_cached']} cached) | "
                  f"+clock {r['clock_ttft_ms']:>7.1f} ms ({r['clock_cached']}) | timestamp "
                  f"{r['timestamp_ttft_ms']:>8.1f} ms ({r['timestamp_cached']}) | floor "
                  f"{floor_ms:>6.1f} ms ({r['floor_new_tokens']} new)", flush=True)
    last = rows[-args.last:]

    def median(key: str) -> float:
        return statistics.median(r[key] for r in last)

    ours_ms, clock_ms = median("threadline_ttft_ms"), median("clock_ttft_ms")
    stamped_ms, floor_ms = median("timestamp_ttft_ms"), median("floor_ms")
    report = {"benchmark": "ttft_local", "model": ours.model_id, "threads": ours.threads,
              "turns": rows, "median_last_turns": args.last,
              "threadline_ttft_ms": ours_ms, "threadline_clock_ttft_ms": clock_ms,
              "timestamp_ttft_ms": stamped_ms, "floor_ms": floor_ms,
              "speedup_vs_timestamp": stamped_ms / ours_ms,
              "clock_speedup_vs_timestamp": stamped_ms / clock_ms,
              "ratio_vs_floor": ours_ms / floor_ms,
              "targets_met": {"speedup_vs_timestamp>=10": stamped_ms / ours_ms >= 10,
                              "ratio_vs_floor<=1.2": ours_ms / floor_ms <= 1.2}}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"median TTFT over the last {args.last} turns: threadline {ours_ms:.1f} ms, "
          f"threadline+clock {clock_ms:.1f} ms, timestamp-in-system {stamped_ms:.1f} ms, "
          f"floor {floor_ms:.1f} ms")
    print(f"threadline is {stamped_ms / ours_ms:.1f}x faster than timestamp-in-system "
          f"(target >= 10; with the clock in the tail {stamped_ms / clock_ms:.1f}x) and "
          f"{ours_ms / floor_ms:.2f}x the floor (target <= 1.2)")
    return 0

if __name__ == "__main__":
    sys.exit(main())
