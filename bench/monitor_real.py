"""The trajectory monitor on real conversations: how many it flags and refuses.

What is measured
    Each conversation of one half of the ShareGPT sample (``--split``: the dev/test halves
    the constraint annotations fixed, by a hash of the conversation's base id) played
    through an engine with the monitor on, turn by turn, the scripted model answering with
    the recorded reply (``eval.safety.play``, as ``threadline eval safety`` plays its
    scripts). The conversations are real users' and ordinary (code, writing, business,
    study), so nearly every flag is a false alarm; the count says how often a deployment on
    general chat would flag a conversation for review (risk >= the policy's flag threshold)
    and refuse a turn outright. The monitor is ``standard.default_monitor`` (the rules and,
    with the dense extra, the embeddings and the intent classifier), with ``--reach`` its
    intent classifier's reach (0: every request read) or ``--no-embeddings`` the rules alone.

    .venv/bin/python bench/monitor_real.py --split dev [--reach 0.35] [--json] [--flagged]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from threadline.eval.constraint_corpus import SHAREGPT, split_of
from threadline.eval.safety import Script, ScriptTurn, play, scripted_model
from threadline.standard import default_monitor

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SYSTEM = "You are a helpful assistant."


def conversations(data: Path, split: str) -> Iterator[Script]:
    """The split's conversations as scripts: each user message with the reply recorded
    after it (an empty one where none was)."""
    for line in (data / SHAREGPT).read_text("utf-8").splitlines():
        record = json.loads(line)
        if split_of(SHAREGPT, record["id"].rsplit("_", 1)[0]) != split:
            continue
        turns: list[ScriptTurn] = []
        pending: str | None = None
        for turn in record["conversations"]:
            text = turn.get("value")
            if not isinstance(text, str):
                continue
            if turn.get("from") == "human":
                if pending is not None:
                    turns.append(ScriptTurn(pending, ""))
                pending = text
            elif turn.get("from") == "gpt" and pending is not None:
                turns.append(ScriptTurn(pending, text))
                pending = None
        if pending is not None:
            turns.append(ScriptTurn(pending, ""))
        turns = [t for t in turns if t.user.strip()]
        if turns:  # "benign" and a registered persona: the scripts' shape; never scored here
            yield Script(record["id"], "benign", "nurse", SYSTEM, tuple(turns), split)


def measure(data: Path, split: str, *, embeddings: bool, reach: float,
            limit: int | None) -> dict[str, Any]:
    monitor = default_monitor(None if embeddings else False, reach=reach)
    flag = monitor.policy.flag
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory:
        for n, script in enumerate(conversations(data, split)):
            if limit is not None and n >= limit:
                break
            played = play(script, scripted_model(script), Path(directory), monitor)
            risks = [float(d["risk"]) if d else 0.0 for d in played.decisions]
            first = next((i for i, r in enumerate(risks) if flag is not None and r >= flag),
                         None)
            rows.append({"id": script.id, "turns": len(script.turns), "first_flag": first,
                         "refused_turns": played.refused_by_monitor})
    flagged = [r for r in rows if r["first_flag"] is not None]
    refused = [r for r in rows if r["refused_turns"]]
    return {"benchmark": "monitor_real", "split": split,
            "detectors": [d.name for d in monitor.detectors], "reach": reach,
            "conversations": len(rows), "turns": sum(r["turns"] for r in rows),
            "flagged": len(flagged),
            "flagged_share": round(len(flagged) / len(rows), 3) if rows else None,
            "with_a_refused_turn": len(refused),
            "refused_share": round(len(refused) / len(rows), 3) if rows else None,
            "refused_turns": sum(r["refused_turns"] for r in rows),
            "seconds": round(time.perf_counter() - started, 1),
            "flagged_ids": sorted(r["id"] for r in flagged)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data directory")
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--reach", type=float, default=0.0,
                        help="the intent classifier's reach (a cosine; 0: every request)")
    parser.add_argument("--no-embeddings", action="store_true", help="the rules alone")
    parser.add_argument("--limit", type=int, help="the first N conversations of the split")
    parser.add_argument("--flagged", action="store_true", help="list the flagged ids")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not (args.data / SHAREGPT).is_file():
        parser.error(f"no ShareGPT sample under {args.data} (pass --data)")
    if not 0.0 <= args.reach <= 1.0:
        parser.error(f"--reach is a cosine in [0, 1], not {args.reach}")
    found = measure(args.data, args.split, embeddings=not args.no_embeddings,
                    reach=args.reach, limit=args.limit)
    if not args.flagged:
        del found["flagged_ids"]
    print(json.dumps(found) if args.json else
          "\n".join(f"{k}: {v}" for k, v in found.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
