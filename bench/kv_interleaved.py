"""Interleaved conversations on one local model: time to first token with and without the KV
snapshot cache, against the floor of prefilling only the new tokens.

Four conversations take turns on one engine (SmolLM2-135M in llama.cpp, SQLite), turn by turn,
each growing to about 2,000 tokens (user messages of ~55 tokens, the model's own greedy replies
of up to 40). llama.cpp holds one sequence, so each conversation's turn finds the context full
of the one before it. The arms run on their own model instances, alternating turn by turn:

  single    the backend without snapshots: each turn prefills its whole history again
  cached    the backend with the KV cache (memory and disk tiers, in a scratch directory)
  floor     raw llama.cpp on the cached arm's own tokens: evaluate the part that call found
            cached (untimed), then time only the prefill of the rest and the first sampled
            token (as bench/ttft_local.py does)

Reported: median TTFT over each conversation's last turns; single ÷ cached (target: ≥ 10×)
and cached ÷ floor (target: ≤ 1.3×); and the first turn, if any, where the two engine arms'
greedy replies differ. (They can: the cached arm's history holds the KV of replies decoded one
token at a time, the single arm's the same tokens prefilled in a batch, and llama.cpp's two
paths round differently; its own in-context reuse does the same. A restore itself is exact:
``tests/models/test_llamacpp.py``.)

With ``--serve`` the same conversations go through two ``threadline serve --model local``
processes instead, one with the KV tiers off (``THREADLINE_KV_MEMORY_MB=0``,
``THREADLINE_KV_DISK_MB=0``) and one with the defaults, driven by the official ``openai``
client (streamed ``/v1/chat/completions`` naming the conversation); TTFT is measured at the
client, to the first streamed piece of text.

    .venv/bin/python bench/kv_interleaved.py            # 4 conversations x 20 turns
    .venv/bin/python bench/kv_interleaved.py --quick    # 2 x 3
    .venv/bin/python bench/kv_interleaved.py --serve    # the same through the HTTP service
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from threadline.engine import Engine
from threadline.models.kv import KVCache
from threadline.models.llamacpp import LlamaCppModel, Sampling
from threadline.sequences import common_prefix_len
from threadline.settings import Durability
from threadline.stores.sqlite import SQLiteStore

SYSTEM = "You are a careful assistant for a travel agency. Answer briefly and precisely."
SAMPLING = Sampling(max_tokens=40, temperature=0.0, seed=1)


def user_text(conversation: int, n: int) -> str:
    return (f"Trip {conversation}, turn {n}: please check the itinerary for passenger {n}, "
            f"flight TP{100 * conversation + n}, departing Lisbon at {8 + n % 10}:15, and "
            "confirm the baggage allowance, the seat, and whether the fare can be changed.")


class Floor:
    """Raw llama.cpp: the prefill of only what a call did not find cached."""

    def __init__(self) -> None:
        self.llm = LlamaCppModel(sampling=SAMPLING)._llm

    def ttft_ms(self, tokens: list[int], cached: int) -> float:
        llm = self.llm
        held = common_prefix_len(llm._input_ids[:llm.n_tokens].tolist(), tokens[:cached]) \
            if llm.n_tokens else 0
        llm.n_tokens = held
        llm.eval(tokens[held:cached])  # untimed: the cache the call found
        started = time.perf_counter()
        llm.eval(tokens[cached:])
        llm.sample(temp=0.0)
        return (time.perf_counter() - started) * 1000


def _server(home: Path, *, kv: bool) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "THREADLINE_HOME": str(home), "THREADLINE_MODEL": "local",
           "THREADLINE_DURABILITY": "off"}
    if not kv:
        env.update(THREADLINE_KV_MEMORY_MB="0", THREADLINE_KV_DISK_MB="0")
    process = subprocess.Popen([sys.executable, "-m", "threadline", "serve", "--port",
                                str(port)], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("threadline serve did not start")


def through_serve(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """Single-sequence and cached, as HTTP services, measured at an OpenAI client."""
    import httpx
    import openai

    servers = {"single": _server(scratch / "single", kv=False),
               "cached": _server(scratch / "cached", kv=True)}
    try:
        clients = {name: openai.OpenAI(base_url=f"{base}/v1", api_key="unused")
                   for name, (_, base) in servers.items()}
        ids = {name: [httpx.post(f"{base}/v1/conversations", json={"system": SYSTEM}).json()[
            "id"] for _ in range(args.conversations)] for name, (_, base) in servers.items()}
        rows: list[dict[str, Any]] = []
        for n in range(1, args.turns + 1):
            for c in range(args.conversations):
                row: dict[str, Any] = {"conversation": c, "turn": n}
                for name, client in clients.items():
                    started, first = time.perf_counter(), None
                    stream = client.chat.completions.create(
                        model="local", stream=True,
                        messages=[{"role": "user", "content": user_text(c, n)}],
                        extra_headers={"X-Threadline-Conversation": ids[name][c]})
                    for chunk in stream:
                        if first is None and chunk.choices and chunk.choices[0].delta.content:
                            first = (time.perf_counter() - started) * 1000
                    row[name] = {"ttft_ms": first}
                rows.append(row)
                if not args.json:
                    print(f"serve: conversation {c} turn {n:>2}: single "
                          f"{row['single']['ttft_ms']:>8.1f} ms | cached "
                          f"{row['cached']['ttft_ms']:>7.1f} ms", flush=True)
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(timeout=60)
    last = [r for r in rows if r["turn"] > args.turns - args.last]
    single = statistics.median(r["single"]["ttft_ms"] for r in last)
    cached = statistics.median(r["cached"]["ttft_ms"] for r in last)
    return {"rows": rows, "single_ttft_ms": single, "cached_ttft_ms": cached,
            "speedup_vs_single": single / cached}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=4)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--last", type=int, default=5, help="turns the medians are taken over")
    parser.add_argument("--serve", action="store_true",
                        help="through two HTTP services and the openai client")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.conversations, args.turns, args.last = 2, 3, 2
    scratch = Path(tempfile.mkdtemp(prefix="threadline-kv-"))
    if args.serve:
        served = through_serve(args, scratch)
        report = {"benchmark": "kv_interleaved", "through": "serve",
                  "conversations": args.conversations, "turns": args.turns,
                  "median_last_turns": args.last, **served,
                  "targets_met": {"speedup_vs_single>=10": served["speedup_vs_single"] >= 10}}
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print(f"through serve, at the client: single {served['single_ttft_ms']:.1f} ms, "
                  f"cached {served['cached_ttft_ms']:.1f} ms "
                  f"({served['speedup_vs_single']:.1f}x, target >= 10)")
        return 0
    single_model = LlamaCppModel(sampling=SAMPLING)
    cached_model = LlamaCppModel(sampling=SAMPLING, kv=lambda identity: KVCache(
        identity, memory_bytes=1 << 30, folder=scratch / "kv", disk_bytes=4 << 30))
    arms = {name: Engine(SQLiteStore(scratch / f"{name}.db", durability=Durability.OFF), model,
                         system=SYSTEM)
            for name, model in (("single", single_model), ("cached", cached_model))}
    floor = Floor()
    ids: dict[str, list[str | None]] = {name: [None] * args.conversations for name in arms}
    rows: list[dict[str, Any]] = []
    first_difference: dict[str, int] | None = None
    for n in range(1, args.turns + 1):
        for c in range(args.conversations):
            row: dict[str, Any] = {"conversation": c, "turn": n}
            replies = {}
            for name, engine in arms.items():
                result = engine.run_turn(user_text(c, n), conversation_id=ids[name][c])
                ids[name][c] = result.conversation_id
                call = engine.store.call(result.call.id)
                replies[name] = result.reply.text
                row[name] = {"ttft_ms": call.timings.ttft_ms,
                             "prompt_tokens": call.usage.prompt_tokens,
                             "cached_tokens": call.usage.cached_tokens,
                             "reused_from": call.reused_from,
                             "restore_ms": call.response.get("restore_ms")}
                if name == "cached":
                    assert call.request is not None and call.request.tokens is not None
                    row["floor"] = {"ttft_ms": floor.ttft_ms(list(call.request.tokens),
                                                             call.usage.cached_tokens)}
            if first_difference is None and replies["single"] != replies["cached"]:
                first_difference = {"conversation": c, "turn": n}
            rows.append(row)
            if not args.json:
                print(f"conversation {c} turn {n:>2}: {row['cached']['prompt_tokens']:>5} tok | "
                      f"single {row['single']['ttft_ms']:>8.1f} ms | cached "
                      f"{row['cached']['ttft_ms']:>7.1f} ms ({row['cached']['cached_tokens']} "
                      f"from {row['cached']['reused_from']}) | floor "
                      f"{row['floor']['ttft_ms']:>6.1f} ms", flush=True)
    cached_model.close()
    last = [r for r in rows if r["turn"] > args.turns - args.last]

    def median(arm: str) -> float:
        return statistics.median(r[arm]["ttft_ms"] for r in last)

    single, cached, floor_ms = median("single"), median("cached"), median("floor")
    report = {"benchmark": "kv_interleaved", "model": cached_model.model_id,
              "threads": cached_model.threads, "conversations": args.conversations,
              "turns": args.turns, "median_last_turns": args.last, "rows": rows,
              "single_ttft_ms": single, "cached_ttft_ms": cached, "floor_ttft_ms": floor_ms,
              "speedup_vs_single": single / cached, "ratio_vs_floor": cached / floor_ms,
              "replies_first_differ": first_difference,
              "kv": cached_model.kv.stats() if cached_model.kv is not None else None,
              "targets_met": {"speedup_vs_single>=10": single / cached >= 10,
                              "ratio_vs_floor<=1.3": cached / floor_ms <= 1.3}}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"median TTFT over each conversation's last {args.last} turns: single {single:.1f} "
          f"ms, cached {cached:.1f} ms, floor {floor_ms:.1f} ms")
    print(f"cached is {single / cached:.1f}x faster than single-sequence (target >= 10) and "
          f"{cached / floor_ms:.2f}x the floor (target <= 1.3); replies first differ: "
          f"{first_difference}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
