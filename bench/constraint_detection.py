"""Standing-constraint detection on hand-annotated real user messages, and its cost per turn.

What is measured
    Precision and recall of ``compaction.constraints.detect`` on both annotation splits
    (dev: the rules were tuned on it; test: not), as ``threadline eval constraints`` reports
    them, next to the rules it replaced (read from git at ``--previous``, the commit before
    the change); and the detector's time per user message over every user message of the
    three sources, the new rules ÷ the previous ones, in one run.

    Sources: ``../shared/data`` (ShareGPT's 3,528 human messages, tau-bench's simulated
    customers, Lost in Conversation's simulated users); annotations in
    ``src/threadline/eval/annotations/constraints.jsonl``.

    .venv/bin/python bench/constraint_detection.py
    .venv/bin/python bench/constraint_detection.py --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path

from threadline.compaction.constraints import detect
from threadline.eval import constraints as constraint_eval
from threadline.eval.constraint_annotations import ANNOTATIONS, load
from threadline.eval.constraint_corpus import SPLITS, message_texts

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data"
PREVIOUS = "a75764c"  # the last commit with the previous rules
_PATH = "src/threadline/compaction/constraints.py"


def previous_detector(commit: str) -> Callable[[str], Sequence[str]]:
    """``detect`` as it was at ``commit`` (it imports only modules that still exist)."""
    source = subprocess.run(["git", "show", f"{commit}:{_PATH}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType("previous_constraints")
    sys.modules[module.__name__] = module  # its dataclasses look themselves up there
    exec(compile(source, f"{commit}:{_PATH}", "exec"), module.__dict__)  # noqa: S102
    return module.__dict__["detect"]  # type: ignore[no-any-return]


def per_message_ms(detector: Callable[[str], Sequence[str]], texts: Sequence[str],
                   rounds: int) -> float:
    """The median over ``rounds`` of the mean milliseconds per message."""
    means = []
    for _ in range(rounds):
        started = time.perf_counter()
        for text in texts:
            detector(text)
        means.append((time.perf_counter() - started) * 1000 / len(texts))
    return statistics.median(means)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--previous", default=PREVIOUS, help="commit of the previous rules")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    annotated, strata = load(args.data, ANNOTATIONS)
    messages = message_texts(args.data)
    detectors = {"rules": detect, "previous rules": previous_detector(args.previous)}
    report: dict = {"benchmark": "constraint_detection", "previous": args.previous,
                    "splits": {}}
    for name, detector in detectors.items():
        scored, _ = constraint_eval.flag(annotated, detector, messages)
        for split in SPLITS:
            report["splits"].setdefault(split, {})[name] = constraint_eval.score(
                scored, strata, split)
    texts = list(messages.values())
    cost = {name: per_message_ms(d, texts, args.rounds) for name, d in detectors.items()}
    report["cost"] = {"messages": len(texts),
                      "ms_per_message": {k: round(v, 4) for k, v in cost.items()},
                      "ratio_new_over_previous": round(cost["rules"] / cost["previous rules"],
                                                       2)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for split, rows in report["splits"].items():
        for name, r in rows.items():
            est = r["estimated"]
            print(f"{split:<5} {name:<15} precision {r['precision']}  recall {r['recall']}  "
                  f"(est. tp {est['tp']}, fp {est['fp']}, fn {est['fn']}; near-misses "
                  f"flagged {r['one_off']['flagged']}/{r['one_off']['annotated']})")
            print("      " + ", ".join(f"{label} {v['found']}/{v['rules']}"
                                       for label, v in r["per_label_recall"].items()))
    c = report["cost"]
    print(f"cost per message over {c['messages']} messages: {c['ms_per_message']} "
          f"(ratio {c['ratio_new_over_previous']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
