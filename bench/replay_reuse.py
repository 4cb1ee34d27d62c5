"""Prefix reuse on real traffic: ShareGPT replayed through threadline and three naive assemblers.

Every conversation of ``../shared/data/sharegpt-sample-1000`` is replayed turn by turn
(``threadline.eval.replay``): for each user message, each policy assembles the request, it is
rendered as ChatML and tokenized with SmolLM2's own tokenizer (llama.cpp, vocabulary only; a
word tokenizer if llama.cpp is missing), and compared with the same policy's previous request.
All four policies carry the same per-turn information (the time, and a passage retrieved for
the question); they differ only in where they put it. Reported, in one run:

  reused ÷ theoretical best   reused tokens over what an append-only prefix could reuse (the
                              previous request up to its last breakpoint). Target for threadline
                              ≥ 0.99, with 0 misses the prefix report cannot explain.
  billed cost                 under the Anthropic 5-minute profile, per policy, and with no
                              cache at all; ratios to threadline.

    .venv/bin/python bench/replay_reuse.py                 # all 1,000 conversations
    .venv/bin/python bench/replay_reuse.py --limit 50      # a sample
    .venv/bin/python bench/replay_reuse.py --quick --json  # smoke test
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from threadline.cache.pricing import profile
from threadline.cache.tokens import WordTokenizer, default_tokenizer
from threadline.eval.replay import POLICIES, replay
from threadline.interop.importers import ImportRecord, read_records
from threadline.items import NewItem

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "sharegpt-sample-1000"
TARGET = 0.99


def _tiny() -> list[tuple[str | None, list[NewItem]]]:
    """A built-in sample for --quick, so the smoke test needs no shared data."""
    return [(None, [x for n in range(4) for x in (NewItem.user(f"Question {n}?"),
                                                  NewItem.assistant("An answer. " * 20))])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA / "sharegpt_sample_1000.jsonl")
    parser.add_argument("--limit", type=int, help="replay at most this many conversations")
    parser.add_argument("--profile", default="anthropic-5m")
    parser.add_argument("--input-price", type=float, default=3.0, help="USD per million")
    parser.add_argument("--quick", action="store_true", help="built-in sample, word tokenizer")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        conversations, tokenizer = _tiny(), WordTokenizer()
    else:
        if not args.data.exists():
            parser.error(f"{args.data} not found (the shared data folder sits next to the repo)")
        records = [r for r in read_records(args.data.read_bytes(), "sharegpt",
                                           max_message_bytes=4 * 2**20)
                   if isinstance(r, ImportRecord)]
        conversations = [(r.system, r.items) for r in records[: args.limit]]
        tokenizer = default_tokenizer()
    started = time.perf_counter()
    result = replay(conversations, tokenizer=tokenizer, profile=profile(args.profile),
                    input_price=args.input_price, policies=tuple(POLICIES))
    elapsed = time.perf_counter() - started
    ours = result.policies["threadline"]
    ratio = ours.reused_tokens / ours.theoretical_reused_tokens \
        if ours.theoretical_reused_tokens else 0.0
    report = {"benchmark": "replay_reuse", "seconds": round(elapsed, 1), **result.to_json(),
              "threadline_reuse_vs_theoretical": ratio, "target": TARGET,
              "target_met": ratio >= TARGET and ours.unexplained_misses == 0,
              "cost_ratio_vs_threadline": {name: t.cost_usd / ours.cost_usd
                                           for name, t in result.policies.items()},
              "no_cache_ratio_vs_threadline": ours.uncached_cost_usd / ours.cost_usd}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{result.conversations} conversations, tokenizer {result.tokenizer}, "
          f"{result.profile} at ${args.input_price}/M, {elapsed:.0f} s")
    print(f"{'policy':<24} {'prompt tok':>12} {'reused':>12} {'best':>12} {'ratio':>7} "
          f"{'misses':>7} {'unexpl.':>7} {'USD':>9} {'× ours':>7}")
    for name, t in result.policies.items():
        best = t.theoretical_reused_tokens
        print(f"{name:<24} {t.prompt_tokens:>12,} {t.reused_tokens:>12,} {best:>12,} "
              f"{t.reused_tokens / best if best else 0:>7.3f} {sum(t.misses.values()):>7} "
              f"{t.unexplained_misses:>7} {t.cost_usd:>9.2f} "
              f"{t.cost_usd / ours.cost_usd:>7.2f}")
    print(f"{'no cache (threadline)':<24} {'':>12} {'':>12} {'':>12} {'':>7} {'':>7} {'':>7} "
          f"{ours.uncached_cost_usd:>9.2f} {ours.uncached_cost_usd / ours.cost_usd:>7.2f}")
    verdict = "met" if report["target_met"] else "MISSED"
    print(f"threadline reused / theoretical best: {ratio:.4f} with "
          f"{ours.unexplained_misses} unexplained misses (target >= {TARGET}, 0: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
