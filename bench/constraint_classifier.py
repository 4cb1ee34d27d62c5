"""Training the standing-constraint classifier on the dev annotations, by cross-validation
within dev only, and writing the weights threadline ships.

What is measured
    For each way of combining the classifier with the rules (``eval/constraint_training.py``:
    the classifier over the MiniLM embedding alone, the rules OR it, the classifier over the
    embedding plus the rules' verdicts, and the rules OR that), the regularisation and the
    threshold that cross-validate best on dev (five folds by conversation group; F2 on the
    estimated counts), and that choice's out-of-fold precision and recall on dev, next to the
    rules'. The test split is never read here. With ``--write`` the best variant that keeps
    everything the rules find (a "rules OR" one: a classifier alone dropped bench fixture
    rules), fitted on all of dev, becomes ``src/threadline/compaction/constraint_classifier.json``.

    Needs the dense extra (the shipped MiniLM model) and ``../shared/data``.

    .venv/bin/python bench/constraint_classifier.py
    .venv/bin/python bench/constraint_classifier.py --write
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from threadline.compaction.constraint_classifier import WEIGHTS, write_weights
from threadline.compaction.constraints import detect
from threadline.eval import constraint_training as training
from threadline.eval.constraint_annotations import ANNOTATIONS, load
from threadline.eval.constraint_corpus import message_texts, messages
from threadline.retrieval.dense import DIMENSION, MODEL_NAME, Embedder

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data"


def cached_embed(cache: Path | None) -> Callable[[Sequence[str]], Any]:
    """The model's vectors for texts, kept in ``cache`` (an .npz of texts and vectors, no
    pickles) so that a second run does not embed again."""
    import numpy as np

    known: dict[str, Any] = {}
    if cache is not None and cache.is_file():
        with np.load(cache, allow_pickle=False) as stored:
            known = dict(zip(stored["texts"].tolist(), stored["vectors"], strict=True))

    def embed(texts: Sequence[str]) -> Any:
        missing = sorted({t for t in texts if t not in known})
        if missing:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            known.update(zip(missing, Embedder().vectors(missing), strict=True))
            if cache is not None:
                np.savez(cache, texts=np.array(list(known)),
                         vectors=np.array(list(known.values()), dtype=np.float32))
        return [known[t] for t in texts]
    return embed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--cache", type=Path, help="keep the dev sentences' vectors here")
    parser.add_argument("--write", action="store_true",
                        help=f"write the best variant's weights to {WEIGHTS.name}")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    annotated, strata = load(args.data, ANNOTATIONS)
    groups = {(m.file, m.conversation): m.group for m in messages(args.data)}
    train = training.examples(annotated, strata, groups, cached_embed(args.cache),
                              message_texts(args.data), detect)
    rules = training.report(train, [e.rule for e in train], strata)
    choices = training.cross_validate(train, strata, DIMENSION)
    # only a variant that keeps whatever the rules find may ship: the rules are what the bench
    # fixtures (retention 1.000) and the documented phrasings are held to
    best = max((c for c in choices if c.variant.union), key=lambda c: training.criterion(c.cv))
    rows = [{"variant": "rules", "l2": None, "threshold": None, **_figures(rules)}]
    rows += [{"variant": c.variant.name, "l2": c.l2, "threshold": c.threshold,
              **_figures(c.cv)} for c in choices]
    report = {"benchmark": "constraint_classifier", "split": "dev (cross-validated, "
              f"{training.FOLDS} folds by conversation group)", "criterion": "F2",
              "sentences": len(train), "variants": rows, "adopted": best.variant.name,
              "seconds": round(time.perf_counter() - started, 1)}
    if args.write:
        write_weights(WEIGHTS, training.train_final(train, best, DIMENSION, MODEL_NAME))
        report["written"] = str(WEIGHTS.relative_to(ROOT))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"dev, cross-validated ({training.FOLDS} folds by conversation group), "
          f"{len(train)} annotated sentences; threshold and L2 by F2 on estimated counts")
    for row in rows:
        print(f"{row['variant']:<50} precision {row['precision']}  recall {row['recall']}  "
              f"F2 {row['f2']}  (est. tp {row['tp']}, fp {row['fp']}, fn {row['fn']}; "
              f"near-misses flagged {row['one_off_flagged']}; l2 {row['l2']}, "
              f"threshold {row['threshold']})")
    print(f"adopted: {best.variant.name}" + (f"; written to {report['written']}"
                                              if args.write else ""))
    return 0


def _figures(scored: dict[str, Any]) -> dict[str, Any]:
    est = scored["estimated"]
    return {"precision": scored["precision"], "recall": scored["recall"],
            "f2": round(training.criterion(scored), 3), "tp": est["tp"], "fp": est["fp"],
            "fn": est["fn"], "one_off_flagged": scored["one_off"]["flagged"],
            "per_label_found": {k: f"{v['found']}/{v['rules']}"
                                for k, v in scored["per_label_recall"].items()}}


if __name__ == "__main__":
    raise SystemExit(main())
