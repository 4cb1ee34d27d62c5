"""Goal reminders at the tail against the same conversation without them: prefix reuse.

One conversation of N user turns (10 and 40; a goal, then follow-ups) runs through an engine
with the scripted model (its "KV cache" reuses what the previous call left, as llama.cpp
would) under four arms: no reminder, the goal every 3 turns, goal and policy every 3 turns,
and the goal every turn. The reply depends on the new message alone, so the arms' histories
are the same. Reported per arm: the cached tokens the model reported and the reused bytes of
the prefix reports, summed over the conversation, as ratios to the arm without reminders;
the calls whose prefix report was not an expected cause; the calls whose request, less what
the reminder added, differs from the plain arm's (target: 0); and the share of calls whose
request began with the whole previous one. Reminders are kept where they were shown (the
default) or, in the "tail only" arms, shown in their own turn's tail alone.

    .venv/bin/python bench/reminder_reuse.py
    .venv/bin/python bench/reminder_reuse.py --quick --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from threadline.engine import Engine
from threadline.models.scripted import ScriptedModel
from threadline.providers import GoalReminder
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.providers import ContextProvider

SYSTEM = "You are a cooking assistant. Only discuss recipes and kitchen safety."
GOAL = "Help me plan a vegetarian dinner for six, with a dessert."
ARMS: dict[str, list[ContextProvider]] = {
    "plain": [], "goal every 3": [GoalReminder(3)],
    "both every 3": [GoalReminder(3, what="both")], "goal every turn": [GoalReminder(1)],
    "goal every 3, tail only": [GoalReminder(3, kept=False)],
    "both every 3, tail only": [GoalReminder(3, what="both", kept=False)]}


def run(directory: Path, arm: str, turns: int) -> dict[str, Any]:
    store = SQLiteStore(directory / f"{arm.replace(' ', '_')}-{turns}.db")
    try:
        model = ScriptedModel(default=lambda r: f"A plan for: {r.messages[-1].content}")
        engine = Engine(store, model, system=SYSTEM, providers=ARMS[arm])
        cid: str | None = None
        calls = []
        for n in range(1, turns + 1):
            text = GOAL if n == 1 else f"Question {n}: what about course {n} and its timing?"
            result = engine.run_turn(text, conversation_id=cid)
            cid, calls = result.conversation_id, [*calls, store.call(result.call.id)]
        requests = []
        said = {GOAL, *(f"Question {n}: what about course {n} and its timing?"
                        for n in range(2, turns + 1))}
        for call in calls:
            assert call.request is not None
            messages = [dict(m) for m in call.request.messages]
            # less what the reminder added: its tail, or the reminders kept where shown
            requests.append([m for m in messages if m["role"] != "user"
                             or m["content"] in said])
        return {"cached": sum(c.usage.cached_tokens for c in calls),
                "appends": sum(1 for c in calls[1:]
                               if (c.prefix or {}).get("cause") == "append_only"),
                "prompt": sum(c.usage.prompt_tokens for c in calls),
                "reused_bytes": sum(int((c.prefix or {}).get("reused_bytes", 0)) for c in calls),
                "unexpected": sum(1 for c in calls[1:] if not (c.prefix or {}).get("expected")),
                "requests": requests}
    finally:
        store.close()


def measure(quick: bool) -> dict[str, Any]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for turns in (10,) if quick else (10, 40):
            plain = run(Path(tmp), "plain", turns)
            for arm in ARMS:
                got = plain if arm == "plain" else run(Path(tmp), arm, turns)
                rows.append({
                    "turns": turns, "arm": arm,
                    "cached_ratio": round(got["cached"] / plain["cached"], 4),
                    "reused_bytes_ratio": round(got["reused_bytes"] / plain["reused_bytes"], 4),
                    "prompt_ratio": round(got["prompt"] / plain["prompt"], 4),
                    "unexpected_causes": got["unexpected"],
                    # calls whose request began with the whole previous one and its reply
                    "whole_previous_reused": round(got["appends"] / (turns - 1), 4),
                    "requests_differing_above_tail": sum(
                        a != b for a, b in zip(got["requests"], plain["requests"], strict=True)),
                })
    return {"benchmark": "reminder_reuse", "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the 10-turn conversation only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(args.quick)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{'turns':>5} {'arm':<24} {'cached':>7} {'reused B':>8} {'prompt':>7} "
          f"{'unexpected':>10} {'differ':>6} {'whole prev':>10}")
    for r in report["rows"]:
        print(f"{r['turns']:>5} {r['arm']:<24} {r['cached_ratio']:>7.3f} "
              f"{r['reused_bytes_ratio']:>8.3f} {r['prompt_ratio']:>7.3f} "
              f"{r['unexpected_causes']:>10} {r['requests_differing_above_tail']:>6} "
              f"{r['whole_previous_reused']:>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
