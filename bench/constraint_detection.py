"""Standing-constraint detection on hand-annotated real user messages, and its cost per turn.

What is measured
    Precision and recall of ``compaction.constraints.detect`` on both annotation splits
    (dev: the rules were tuned on it; test: not), as ``threadline eval constraints`` reports
    them, next to the rules it replaced (read from git at ``--previous``, the commit before
    the change) and, with the dense extra, the rules with the embedding classifier
    (``compaction/constraint_classifier.py``, trained on dev); and each detector's time per
    user message, against the rules now, in one run: the rules over every user message of the
    three sources, the classifier over ``--cost-messages`` of them (a hash sample; it embeds
    each message's sentences in one batch, with the model already loaded, no cache).

    Sources: ``../shared/data`` (ShareGPT's 3,528 human messages, tau-bench's simulated
    customers, Lost in Conversation's simulated users); annotations in
    ``src/threadline/eval/annotations/constraints.jsonl``.

    .venv/bin/python bench/constraint_detection.py
    .venv/bin/python bench/constraint_detection.py --split dev --cost-messages 300 --json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path

from threadline.compaction.constraint_classifier import ClassifiedDetector
from threadline.compaction.constraints import detect
from threadline.eval import constraints as constraint_eval
from threadline.eval.constraint_annotations import ANNOTATIONS, load
from threadline.eval.constraint_corpus import SPLITS, message_texts
from threadline.retrieval import dense

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


def classifier_cost(texts: Sequence[str], rounds: int) -> tuple[float, float]:
    """The classifier's median milliseconds per message (a fresh detector each round, so
    nothing is cached; one model, loaded first), and the seconds the model took to load."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    embedder = dense.Embedder()
    loaded = time.perf_counter() - started
    means = []
    for _ in range(rounds):
        detector = ClassifiedDetector(lambda: embedder, model=dense.MODEL_NAME,
                                      dim=dense.DIMENSION)
        detector("Warm up.")
        means.append(per_message_ms(detector, texts, 1))
    return statistics.median(means), loaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--previous", default=PREVIOUS, help="commit of the previous rules")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--split", choices=SPLITS, action="append",
                        help="score only this split (repeatable; default: both)")
    parser.add_argument("--cost-messages", type=int, default=300,
                        help="messages the classifier is timed on")
    parser.add_argument("--no-classifier", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    splits = args.split or list(SPLITS)
    annotated, strata = load(args.data, ANNOTATIONS)
    annotated = [a for a in annotated if a.sentence.split in splits]
    messages = message_texts(args.data)
    detectors: dict[str, Callable[[str], Sequence[str]]] = {
        "rules": detect, "previous rules": previous_detector(args.previous)}
    classify = dense.available() and not args.no_classifier
    if classify:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        detectors["rules + classifier"] = ClassifiedDetector(
            dense.Embedder, model=dense.MODEL_NAME, dim=dense.DIMENSION)
    report: dict = {"benchmark": "constraint_detection", "previous": args.previous,
                    "splits": {}}
    for name, detector in detectors.items():
        scored, _ = constraint_eval.flag(annotated, detector, messages)
        for split in splits:
            report["splits"].setdefault(split, {})[name] = constraint_eval.score(
                scored, strata, split)
    texts = list(messages.values())
    cost = {name: per_message_ms(detectors[name], texts, args.rounds)
            for name in ("rules", "previous rules")}
    report["cost"] = {"messages": len(texts),
                      "ms_per_message": {k: round(v, 4) for k, v in cost.items()},
                      "ratio_new_over_previous": round(cost["rules"] / cost["previous rules"],
                                                       2)}
    if classify:
        sample = sorted(texts, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
        sample = sample[:args.cost_messages]
        rules_ms = per_message_ms(detect, sample, args.rounds)
        classifier_ms, loaded = classifier_cost(sample, min(args.rounds, 3))
        report["cost"]["classifier"] = {
            "messages": len(sample), "ms_per_message": {"rules": round(rules_ms, 4),
                                                        "rules + classifier":
                                                            round(classifier_ms, 3)},
            "ratio_over_rules": round(classifier_ms / rules_ms, 1),
            "model_load_s": round(loaded, 2)}
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
    if "classifier" in c:
        k = c["classifier"]
        print(f"classifier cost per message over {k['messages']} messages: "
              f"{k['ms_per_message']} (ratio {k['ratio_over_rules']}; the model loads in "
              f"{k['model_load_s']} s, once)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
