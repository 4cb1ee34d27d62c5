"""A new process answering turn 21: cold (no KV snapshots) against warm (from disk).

A 20-turn conversation (~2,000 tokens; user messages of ~55 tokens, the model's own greedy
replies of up to 40) is built once with the local model, leaving its KV snapshot on disk.
Then, in rounds, two fresh ``threadline chat --once`` processes answer the same turn 21 on
copies of that data directory: one with the disk tier off (``THREADLINE_KV_DISK_MB=0``: it
prefills the whole history), one with it on (it restores the snapshot the build left).

Reported: median TTFT of each side, cold ÷ warm (target: ≥ 10×), the share of the prompt the
warm side found cached (target: ≥ 95%), restore ms per 1,000 tokens against prefill ms per
1,000 tokens, and snapshot bytes on disk per token.

    .venv/bin/python bench/kv_process.py            # 20 turns, 3 rounds
    .venv/bin/python bench/kv_process.py --quick    # 4 turns, 1 round
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from threadline.engine import Engine
from threadline.models.kv import KVCache
from threadline.models.llamacpp import LlamaCppModel, Sampling
from threadline.settings import Settings
from threadline.stores.sqlite import SQLiteStore

SAMPLING = Sampling(max_tokens=40, temperature=0.0, seed=1)
SYSTEM = "You are a careful assistant for a travel agency. Answer briefly and precisely."


def user_text(n: int) -> str:
    return (f"Turn {n}: please check the itinerary for passenger {n}, flight TP{100 + n}, "
            f"departing Lisbon at {8 + n % 10}:15, and confirm the baggage allowance, the "
            "seat, and whether the fare can be changed.")


def build(home: Path, turns: int) -> str:
    settings = Settings(home=home)
    home.mkdir(parents=True, exist_ok=True)
    model = LlamaCppModel(sampling=SAMPLING, kv=lambda identity: KVCache(
        identity, memory_bytes=1 << 30, folder=settings.kv_dir, disk_bytes=4 << 30))
    store = SQLiteStore(settings.db_path)
    engine = Engine(store, model, system=SYSTEM)
    cid = None
    for n in range(1, turns + 1):
        cid = engine.run_turn(user_text(n), conversation_id=cid).conversation_id
    model.close()
    store.close()
    assert cid is not None
    return cid


def answer(home: Path, cid: str, text: str, *, warm: bool) -> dict[str, Any]:
    env = {**os.environ, "THREADLINE_HOME": str(home), "THREADLINE_MODEL": "local",
           "THREADLINE_KV_DISK_MB": "4096" if warm else "0"}
    run = subprocess.run([sys.executable, "-m", "threadline", "chat", "--once", text,
                          "--conversation", cid, "--json"], env=env, capture_output=True,
                         text=True, timeout=900, check=True)
    shown = json.loads(run.stdout)
    store = SQLiteStore(home / "threadline.db")
    call = store.call(shown["call_id"])
    store.close()
    kv = call.response.get("kv") or {}
    return {"ttft_ms": call.timings.ttft_ms, "prompt_tokens": call.usage.prompt_tokens,
            "cached_tokens": call.usage.cached_tokens, "reused_from": call.reused_from,
            "restore_ms": call.response.get("restore_ms"),
            "restored_tokens": kv.get("restored_tokens")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.rounds = 4, 1
    scratch = Path(tempfile.mkdtemp(prefix="threadline-kvp-"))
    built = scratch / "built"
    cid = build(built, args.turns)
    snapshots = list((built / "kv").rglob("*.kv"))
    snapshot_bytes = sum(p.stat().st_size for p in snapshots)
    results: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": []}
    text = user_text(args.turns + 1)
    for n in range(args.rounds):
        for side in (("cold", "warm") if n % 2 == 0 else ("warm", "cold")):
            home = scratch / f"{side}-{n}"
            shutil.copytree(built, home)
            results[side].append(answer(home, cid, text, warm=side == "warm"))
            shutil.rmtree(home)
            if not args.json:
                r = results[side][-1]
                print(f"round {n} {side}: TTFT {r['ttft_ms']:.1f} ms, {r['cached_tokens']} of "
                      f"{r['prompt_tokens']} cached (from {r['reused_from']})", flush=True)
    cold = statistics.median(r["ttft_ms"] for r in results["cold"])
    warm = statistics.median(r["ttft_ms"] for r in results["warm"])
    hot = results["warm"]
    cached_share = min(r["cached_tokens"] / r["prompt_tokens"] for r in hot)
    restore_per_k = statistics.median(1000 * r["restore_ms"] / r["restored_tokens"] for r in hot
                                      if r["restore_ms"] is not None and r["restored_tokens"])
    prefill_per_k = statistics.median(1000 * r["ttft_ms"] / r["prompt_tokens"]
                                      for r in results["cold"])
    tokens = max(r["restored_tokens"] or 0 for r in hot)
    report = {"benchmark": "kv_process", "turns": args.turns, "rounds": args.rounds,
              "results": results, "cold_ttft_ms": cold, "warm_ttft_ms": warm,
              "speedup": cold / warm, "cached_share_min": cached_share,
              "restore_ms_per_1000_tokens": restore_per_k,
              "prefill_ms_per_1000_tokens": prefill_per_k,
              "snapshots_on_disk": len(snapshots), "snapshot_bytes": snapshot_bytes,
              "bytes_per_token": snapshot_bytes / tokens if tokens else None,
              "targets_met": {"speedup>=10": cold / warm >= 10,
                              "cached_share>=0.95": cached_share >= 0.95}}
    shutil.rmtree(scratch)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"turn {args.turns + 1} in a new process: cold {cold:.1f} ms, warm from disk "
          f"{warm:.1f} ms ({cold / warm:.1f}x, target >= 10); {cached_share:.1%} of the prompt "
          f"cached (target >= 95%)")
    print(f"restore {restore_per_k:.1f} ms per 1,000 tokens against prefill "
          f"{prefill_per_k:.1f} ms; {report['bytes_per_token']:,.0f} bytes on disk per token")
    return 0


if __name__ == "__main__":
    sys.exit(main())
