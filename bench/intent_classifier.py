"""The trajectory monitor's intent classifier: fit it on the shipped examples and, with
``--write``, ship the coefficients (``providers/monitor/intent.json``).

The examples (``providers/monitor/intent.toml``) are embedded with the shipped MiniLM model and
fitted by ``IntentClassifier.fitted``; the file records the model, the examples' digest and
the regularisation, so the monitor uses it only for exactly these examples and this model
(anything else is fitted in the process). Also printed: 5-fold cross-validated accuracy and
AUC within the examples (folds by position, every fifth example), a check of the fit, not a
measure of the monitor; the monitor's figures come from ``threadline eval safety``.

    .venv/bin/python bench/intent_classifier.py            # fit and report
    .venv/bin/python bench/intent_classifier.py --write    # and write intent.json
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from threadline.providers.monitor.intent import WEIGHTS, IntentClassifier, IntentExamples
from threadline.retrieval import dense


def auc(positive: np.ndarray, negative: np.ndarray) -> float:
    wins = (positive[:, None] > negative[None, :]).sum() + \
        0.5 * (positive[:, None] == negative[None, :]).sum()
    return float(wins / (len(positive) * len(negative)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {WEIGHTS.name}")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    if not dense.available():
        parser.error("needs the dense extra (pip install 'threadline[dense]')")
    embedder = dense.Embedder()
    examples = IntentExamples.default()
    texts = [*examples.forbidden, *examples.allowed]
    vectors = dict(zip(texts, embedder.vectors(texts), strict=True))

    def embed(batch: list[str]) -> list[np.ndarray]:
        return [vectors[t] for t in batch]

    scores: dict[bool, list[float]] = {True: [], False: []}
    for fold in range(args.folds):
        train = IntentExamples(
            tuple(t for n, t in enumerate(examples.forbidden) if n % args.folds != fold),
            tuple(t for n, t in enumerate(examples.allowed) if n % args.folds != fold))
        model = IntentClassifier.fitted(embed, train)
        for forbidden, group in ((True, examples.forbidden), (False, examples.allowed)):
            scores[forbidden] += [model.probability(vectors[t])
                                  for n, t in enumerate(group) if n % args.folds == fold]
    positive, negative = np.array(scores[True]), np.array(scores[False])
    accuracy = (float((positive >= 0.5).mean()) + float((negative < 0.5).mean())) / 2
    classifier = IntentClassifier.fitted(embed, examples)
    report = {"forbidden": len(examples.forbidden), "allowed": len(examples.allowed),
              "model": embedder.name, "digest": examples.digest(),
              "cross_validated": {"folds": args.folds, "balanced_accuracy": round(accuracy, 3),
                                  "auc": round(auc(positive, negative), 3)}}
    if args.write:
        classifier.write(WEIGHTS, model=embedder.name, examples=examples)
        report["written"] = str(WEIGHTS)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
