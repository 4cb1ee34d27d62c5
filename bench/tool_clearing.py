"""Tool-result clearing on real agent runs: batched clearing versus a little on every call.

What is measured
    Each tau-bench airline trajectory (``../shared/data/tau-bench-trajectories``: a GPT-4o agent,
    its tool calls and results, a long shared policy prompt) is replayed call by call: before
    every assistant message the request is assembled from the log so far. Three policies:

    none        every tool result stays (the baseline for tokens saved)
    threadline  when the request passes the high-water mark, clear every result but the
                newest ``--keep`` in one step, and only if that saves ``--clear-at-least``
                tokens (the tool-result clearing planner)
    threadline-priced  the same, applied only when the plan's price says it pays for itself
                over the next 10 calls under the bill below (what the engine's trigger
                policy does short of the context limit)
    every-call  before every call, clear whatever is older than the newest ``--keep``
                results (what a naive per-turn observation mask does)

    Reported per policy: prompt tokens sent, tokens saved against ``none``, prefix resets
    per conversation (calls whose request does not start with the previous request), tokens
    re-prefilled per reset (the previous request's tokens after the point of divergence,
    which were cached and must be computed again), and the bill under ``anthropic-5m``
    (reads 0.1×, writes 1.25×; the last breakpoint on the newest message).

    .venv/bin/python bench/tool_clearing.py
    .venv/bin/python bench/tool_clearing.py --quick --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from threadline.cache.pricing import profile
from threadline.cache.tokens import WordTokenizer, default_tokenizer
from threadline.compaction.clear_tools import clearable
from threadline.compaction.compact import plan
from threadline.compaction.plan import Policy, request_tokens
from threadline.compaction.view import context_view
from threadline.items import Item, ItemKind, NewItem, next_item
from threadline.request import Request
from threadline.turn.assemble import MessageMemo, assemble

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / \
    "tau-bench-trajectories" / "gpt-4o-airline.json"
POLICIES = ("none", "threadline", "threadline-priced", "every-call")
_T = datetime(2024, 5, 15, tzinfo=UTC)


@dataclass
class Totals:
    calls: int = 0
    prompt_tokens: int = 0
    resets: int = 0
    reprefilled: int = 0
    events: int = 0
    cost_usd: float = 0.0
    per_conversation_resets: list[int] = field(default_factory=list)

    def to_json(self, baseline: Totals | None, conversations: int) -> dict[str, Any]:
        saved = None if baseline is None else baseline.prompt_tokens - self.prompt_tokens
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "tokens_saved": saved,
                "saved_fraction": None if baseline is None else saved / baseline.prompt_tokens,
                "clearing_events": self.events,
                "resets_per_conversation": self.resets / conversations,
                "reprefilled_tokens_per_reset": self.reprefilled / self.resets
                if self.resets else 0.0,
                "cost_usd": round(self.cost_usd, 4)}


def trajectories(path: Path, limit: int | None) -> list[tuple[str, list[NewItem]]]:
    out = []
    for record in json.loads(path.read_text("utf-8"))[:limit]:
        system, items = "", []
        for message in record["traj"]:
            role = message["role"]
            if role == "system":
                system = message["content"]
            elif role == "user":
                items.append(NewItem.user(message["content"] or " "))
            elif role == "assistant":
                if message.get("content"):
                    items.append(NewItem.assistant(message["content"]))
                for call in message.get("tool_calls") or []:
                    items.append(NewItem.tool_call(call["id"], call["function"]["name"],
                                                   json.loads(call["function"]["arguments"])))
            elif role == "tool":
                items.append(NewItem.tool_result(message["tool_call_id"], message["content"]))
        out.append((system, items))
    return out


def _tiny() -> list[tuple[str, list[NewItem]]]:
    items: list[NewItem] = [NewItem.user("Change my flight.")]
    for n in range(8):
        items += [NewItem.tool_call(f"t{n}", "get_reservation_details", {"id": f"R{n}"}),
                  NewItem.tool_result(f"t{n}", f"reservation R{n}: " + "segment " * 120),
                  NewItem.assistant(f"Reservation R{n} checked.")]
    return [("Airline policy. " * 50, items)]


def replay(system: str, items: Sequence[NewItem], policy_name: str, policy: Policy,
           count: Any, totals: Totals) -> None:
    memo = MessageMemo()
    cache = profile("anthropic-5m")

    def assemble_for(history: Sequence[Item]) -> Request:
        return assemble(history, system=system, memo=memo)

    history: list[Item] = []
    previous: list[tuple[dict[str, Any], int]] | None = None
    resets = 0
    for new in items:
        if new.kind is ItemKind.ASSISTANT or new.kind is ItemKind.TOOL_CALL and \
                (not history or history[-1].kind is not ItemKind.TOOL_CALL):
            # a model call: the request assembled from the log so far (parallel tool calls
            # come from one call)
            _maybe_clear(history, policy_name, policy, assemble_for, count, totals)
            measured = [(m.to_openai(), n) for m, n in
                        request_tokens(assemble_for(history), count)]
            tokens = sum(n for _, n in measured)
            kept = _shared(previous, measured)
            if previous is not None and kept < sum(n for _, n in previous):
                resets += 1
                totals.resets += 1
                totals.reprefilled += sum(n for _, n in previous) - kept
            totals.calls += 1
            totals.prompt_tokens += tokens
            totals.cost_usd += cache.bill(tokens, kept if previous is not None else 0,
                                          3.0).cost_usd
            previous = measured
        _append(history, new)
    totals.per_conversation_resets.append(resets)


def _maybe_clear(history: list[Item], policy_name: str, policy: Policy, assemble_for: Any,
                 count: Any, totals: Totals) -> None:
    if policy_name == "none" or not history:
        return
    if policy_name == "every-call":
        seqs = clearable(context_view(history), keep=policy.keep_tool_results)
        if seqs:
            _append(history, NewItem(ItemKind.COMPACTION, {
                "strategy": "clear_tool_results", "cleared": seqs, "pinned": []}))
            totals.events += 1
        return
    tokens = sum(n for _, n in request_tokens(assemble_for(history), count))
    if tokens <= policy.high_water:
        return
    chosen = plan(history, assemble_for, count, policy, reason="high_water",
                  strategy="clear_tool_results")
    if chosen is None or chosen.saved < policy.clear_at_least:
        return
    if policy_name == "threadline-priced" and not chosen.price.pays_off:
        return
    _append(history, chosen.to_item())
    totals.events += 1


def _shared(previous: list[tuple[dict[str, Any], int]] | None,
            measured: list[tuple[dict[str, Any], int]]) -> int:
    if previous is None:
        return 0
    kept = 0
    for (old, n), (new, _) in zip(previous, measured, strict=False):
        if old != new:
            break
        kept += n
    return kept


def _append(history: list[Item], new: NewItem) -> None:
    history.append(next_item(history, new, conversation_id="c_tau", created_at=_T))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, help="at most this many trajectories")
    parser.add_argument("--high-water", type=int, default=4_000)
    parser.add_argument("--keep", type=int, default=3, help="newest tool results never cleared")
    parser.add_argument("--clear-at-least", type=int, default=1_000)
    parser.add_argument("--quick", action="store_true", help="built-in sample, word tokenizer")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        runs, tokenizer = _tiny(), WordTokenizer()
        args.high_water, args.clear_at_least = 1_000, 200
    else:
        if not args.data.exists():
            parser.error(f"{args.data} not found (the shared data folder sits next to the repo)")
        runs, tokenizer = trajectories(args.data, args.limit), default_tokenizer()
    count = lru_cache(maxsize=None)(lambda text: len(tokenizer.tokenize(text)))
    policy = Policy(high_water=args.high_water, low_water=args.high_water // 2,
                    keep_tool_results=args.keep, clear_at_least=args.clear_at_least,
                    profile="anthropic-5m", input_price=3.0, tokens_per_turn=400)
    started = time.perf_counter()
    totals = {name: Totals() for name in POLICIES}
    for n, (system, items) in enumerate(runs, start=1):
        for name in POLICIES:
            replay(system, items, name, policy, count, totals[name])
        if not args.json and n % 50 == 0:
            print(f"  {n}/{len(runs)} trajectories", file=sys.stderr)
    base = totals["none"]
    report = {"benchmark": "tool_clearing", "trajectories": len(runs),
              "tokenizer": tokenizer.name, "seconds": round(time.perf_counter() - started, 1),
              "high_water": args.high_water, "keep": args.keep,
              "clear_at_least": args.clear_at_least,
              "policies": {name: t.to_json(None if name == "none" else base, len(runs))
                           for name, t in totals.items()}}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{len(runs)} trajectories, tokenizer {tokenizer.name}, {report['seconds']} s")
    print(f"{'policy':<18}{'prompt tokens':>15}{'saved':>8}{'events':>8}{'resets/conv':>13}"
          f"{'re-prefill/reset':>18}{'USD':>9}")
    for name, r in report["policies"].items():
        saved = "" if r["saved_fraction"] is None else f"{r['saved_fraction']:.1%}"
        print(f"{name:<18}{r['prompt_tokens']:>15,}{saved:>8}{r['clearing_events']:>8}"
              f"{r['resets_per_conversation']:>13.2f}{r['reprefilled_tokens_per_reset']:>18.0f}"
              f"{r['cost_usd']:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
