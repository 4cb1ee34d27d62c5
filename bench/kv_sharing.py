"""Shared prefixes and budgets of the KV snapshot cache, with the local model.

Shared prefix: ten conversations open with the same ~1,000-token system prompt and tool set.
The first one prefills it; the first turn of each of the other nine runs on a model instance
of its own (as a new process would), whose memory is empty, so the prefix can only come from
the disk tier. Target: every one of them finds at least the shared prefix cached.

Budgets: 200 one-turn conversations, each with a prompt of its own, through one engine whose
tiers have small budgets; after every turn the memory tier's bytes and the bytes of the files
in the disk folder are measured. Target: neither ever exceeds its budget.

    .venv/bin/python bench/kv_sharing.py            # 10 conversations; 200 for the budgets
    .venv/bin/python bench/kv_sharing.py --quick    # 3; 20
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from threadline.engine import Engine
from threadline.models.kv import KVCache
from threadline.models.llamacpp import LlamaCppModel, Sampling
from threadline.request import ToolSpec
from threadline.settings import Durability
from threadline.stores.sqlite import SQLiteStore

SAMPLING = Sampling(max_tokens=8, temperature=0.0, seed=1)
POLICY = ("You are the booking assistant of a travel agency. Follow these rules. " + " ".join(
    f"Rule {n}: when a passenger asks about fare class {n}, check the change fee, the "
    "baggage allowance and the seat map before you answer, and never promise a refund."
    for n in range(1, 26)))
TOOLS = [ToolSpec(f"lookup_{name}", f"Look up the {name} of a booking by its reference.",
                  {"type": "object", "properties": {"reference": {"type": "string"}},
                   "required": ["reference"]})
         for name in ("fare", "seat", "baggage", "itinerary", "passenger")]


def _model(folder: Path, *, memory: int, disk: int) -> LlamaCppModel:
    return LlamaCppModel(sampling=SAMPLING, kv=lambda identity: KVCache(
        identity, memory_bytes=memory, folder=folder, disk_bytes=disk))


def shared(scratch: Path, conversations: int) -> dict[str, Any]:
    store = SQLiteStore(scratch / "shared.db", durability=Durability.OFF)
    folder = scratch / "kv-shared"
    first = _model(folder, memory=1 << 30, disk=1 << 30)
    engine = Engine(store, first, system=POLICY, tools=TOOLS)
    opened = engine.run_turn("Booking ABC001: can I change my flight?")
    first.close()
    prefix = None
    rows = []
    for n in range(2, conversations + 1):
        model = _model(folder, memory=1 << 30, disk=1 << 30)  # a new process: memory empty
        result = Engine(store, model, system=POLICY, tools=TOOLS).run_turn(
            f"Booking ABC{n:03d}: what is my baggage allowance?")
        model.close()
        sent = store.call(result.call.id).request
        first_sent = store.call(opened.call.id).request
        assert sent is not None and sent.tokens is not None
        assert first_sent is not None and first_sent.tokens is not None
        common = next((i for i, (a, b) in enumerate(zip(sent.tokens, first_sent.tokens,
                                                        strict=False)) if a != b),
                      min(len(sent.tokens), len(first_sent.tokens)))
        prefix = common if prefix is None else min(prefix, common)
        rows.append({"conversation": n, "prompt_tokens": result.call.usage.prompt_tokens,
                     "cached_tokens": result.call.usage.cached_tokens,
                     "shared_prefix_tokens": common, "reused_from": result.call.reused_from,
                     "ttft_ms": result.call.timings.ttft_ms})
    ok = all(r["cached_tokens"] >= r["shared_prefix_tokens"] for r in rows)
    return {"conversations": conversations,
            "first": {"prompt_tokens": opened.call.usage.prompt_tokens,
                      "ttft_ms": opened.call.timings.ttft_ms},
            "rest": rows, "shared_prefix_tokens": prefix, "target_met": ok}


def budgets(scratch: Path, conversations: int) -> dict[str, Any]:
    store = SQLiteStore(scratch / "budgets.db", durability=Durability.OFF)
    folder = scratch / "kv-budgets"
    memory_budget, disk_budget = 24 << 20, 40 << 20
    model = _model(folder, memory=memory_budget, disk=disk_budget)
    engine = Engine(store, model, system="You are a terse assistant.")
    peak_memory = peak_disk = 0
    for n in range(conversations):
        engine.run_turn(f"Conversation {n}: " + " ".join(f"item-{n}-{k}" for k in range(40)))
        model.close()  # the disk write is done: measure the folder as it is
        assert model.kv is not None and model.kv.memory is not None
        peak_memory = max(peak_memory, model.kv.memory.index.bytes)
        peak_disk = max(peak_disk, sum(p.stat().st_size for p in folder.rglob("*")
                                       if p.is_file()))
    stats = model.kv.stats() if model.kv is not None else {}
    return {"conversations": conversations, "memory_budget_bytes": memory_budget,
            "disk_budget_bytes": disk_budget, "peak_memory_bytes": peak_memory,
            "peak_disk_bytes": peak_disk, "final": stats,
            "target_met": peak_memory <= memory_budget and peak_disk <= disk_budget}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--budget-conversations", type=int, default=200)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.conversations, args.budget_conversations = 3, 20
    scratch = Path(tempfile.mkdtemp(prefix="threadline-kvs-"))
    report = {"benchmark": "kv_sharing", "shared_prefix": shared(scratch, args.conversations),
              "budgets": budgets(scratch, args.budget_conversations)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    s, b = report["shared_prefix"], report["budgets"]
    print(f"shared prefix of {s['shared_prefix_tokens']} tokens: conversations 2-"
          f"{s['conversations']} found "
          f"{min(r['cached_tokens'] for r in s['rest'])}-"
          f"{max(r['cached_tokens'] for r in s['rest'])} tokens cached, from "
          f"{sorted({r['reused_from'] for r in s['rest']})} (target met: {s['target_met']})")
    print(f"budgets over {b['conversations']} conversations: memory peak "
          f"{b['peak_memory_bytes']:,} of {b['memory_budget_bytes']:,} bytes, disk peak "
          f"{b['peak_disk_bytes']:,} of {b['disk_budget_bytes']:,} (target met: "
          f"{b['target_met']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
