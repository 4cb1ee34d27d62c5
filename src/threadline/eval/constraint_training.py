"""Training the standing-constraint classifier on the dev annotations, and choosing among the
ways of combining it with the rules by cross-validation within dev.

Only the dev split is ever read here: the test split stays for the one final measurement
(``threadline eval constraints --split test``).

What is fitted: L2-regularised logistic regression by Newton's method in float64 numpy, which
is deterministic (no random start, no shuffling). Each sentence is weighted as the estimate
weights it (a sampled non-candidate stands for about 25 unread ones), so the classifier sees
the corpus's real proportion of ordinary sentences; positives are then up-weighted to balance
the classes (``balance``), since a rule is one sentence in about fifty.

Cross-validation: five folds of dev by a hash of each conversation's group (the split's own
unit, so paraphrases of one task never sit on both sides of a fold). For every variant and
regularisation strength, every dev sentence gets an out-of-fold score; the threshold is the
one whose out-of-fold flags score best on the estimated counts (``CRITERION``), and the figures
reported are those flags' precision and recall.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.compaction.constraint_classifier import (
    RULE_FEATURES,
    Weights,
    eligible,
    rule_features,
)
from threadline.eval import constraints as constraint_eval
from threadline.eval.constraint_annotations import Annotated, Strata, source_of
from threadline.logistic import fit

FOLDS = 5
L2_GRID = (0.1, 0.3, 1.0, 3.0, 10.0)
BETA = 2.0  # recall counts four times as much as precision: retention is what compaction needs


def criterion(report: dict[str, Any]) -> float:
    """F-beta (beta = 2) of a score report; 0 when nothing is found."""
    p, r = report["precision"] or 0.0, report["recall"] or 0.0
    b2 = BETA * BETA
    return (1 + b2) * p * r / (b2 * p + r) if p and r else 0.0


def fold_of(annotated: Annotated, group: str) -> int:
    source = source_of(annotated.sentence.file)
    digest = hashlib.sha256(f"fold\x00{source}\x00{group}".encode()).digest()
    return digest[0] % FOLDS


@dataclass(frozen=True)
class Example:
    annotated: Annotated
    fold: int
    weight: float          # the estimate's weight of this sentence
    eligible: bool         # the detector looks at it at all (no question, not pasted text)
    features: Any          # embedding, then rule features
    rule: bool             # the rules flag it


@dataclass(frozen=True)
class Variant:
    """One way of deciding, from a sentence's features and the rules' verdict."""

    name: str
    columns: str           # "embedding" or "embedding+rules"
    union: bool            # flagged if the rules flag it, whatever the classifier says


VARIANTS = (Variant("classifier (embedding)", "embedding", union=False),
            Variant("rules OR classifier (embedding)", "embedding", union=True),
            Variant("classifier (embedding + rule features)", "embedding+rules", union=False),
            Variant("rules OR classifier (embedding + rule features)", "embedding+rules",
                    union=True))


def examples(annotated: Sequence[Annotated], strata: Strata, groups: dict[tuple[str, str], str],
             embed: Callable[[Sequence[str]], Any], messages: dict[tuple[str, str, int], str],
             rules: Callable[[str], Sequence[str]]) -> list[Example]:
    """The dev sentences as training examples (``embed``: texts → unit vectors)."""
    import numpy as np

    dev = [a for a in annotated if a.sentence.split == "dev"]
    by_message: dict[tuple[str, str, int], dict[str, list[float]]] = {}
    flagged: dict[tuple[str, str, int], set[str]] = {}
    for a in dev:
        key = (a.sentence.file, a.sentence.conversation, a.sentence.index)
        if key not in by_message:
            text = messages[key]
            by_message[key] = {s: f for s, f in rule_features(text)}
            flagged[key] = set(rules(text))
    vectors = embed([a.sentence.text for a in dev])
    out = []
    for a, vector in zip(dev, vectors, strict=True):
        s = a.sentence
        key = (s.file, s.conversation, s.index)
        rule_row = by_message[key].get(s.text, [0.0] * len(RULE_FEATURES))
        weight = 1.0 if a.stratum == "candidate" else strata.weight("dev", source_of(s.file))
        out.append(Example(a, fold_of(a, groups[(s.file, s.conversation)]), weight,
                           eligible(s.text), np.concatenate([vector, rule_row]),
                           s.text in flagged[key]))
    return out


def _columns(example: Example, columns: str, dim: int) -> Any:
    return example.features if columns == "embedding+rules" else example.features[:dim]


def out_of_fold(train: Sequence[Example], variant: Variant, l2: float, dim: int) -> list[float]:
    """Each eligible example's score from the model fitted on the other folds (-inf for the
    ineligible)."""
    import numpy as np

    scores = [-math.inf] * len(train)
    for fold in range(FOLDS):
        fitted = [e for e in train if e.eligible and e.fold != fold]
        coef, bias = _fit_examples(fitted, variant, l2, dim)
        for n, e in enumerate(train):
            if e.eligible and e.fold == fold:
                z = float(np.asarray(_columns(e, variant.columns, dim)) @ coef + bias)
                scores[n] = z
    return scores


def _fit_examples(fitted: Sequence[Example], variant: Variant, l2: float,
                  dim: int) -> tuple[Any, float]:
    import numpy as np

    x = np.array([_columns(e, variant.columns, dim) for e in fitted])
    y = np.array([1.0 if e.annotated.positive else 0.0 for e in fitted])
    w = np.array([e.weight for e in fitted])
    positive = float(w[y == 1].sum())
    w = np.where(y == 1, w * (float(w.sum()) - positive) / positive, w)  # balance the classes
    return fit(x, y, w, l2)


def flags(train: Sequence[Example], scores: Sequence[float], threshold: float,
          variant: Variant) -> list[bool]:
    return [(variant.union and e.rule) or s >= threshold for e, s in zip(train, scores,
                                                                          strict=True)]


def report(train: Sequence[Example], flagged: Sequence[bool], strata: Strata) -> dict[str, Any]:
    scored = [constraint_eval.Scored(e.annotated, f) for e, f in zip(train, flagged,
                                                                       strict=True)]
    return constraint_eval.score(scored, strata, "dev")


def best_threshold(train: Sequence[Example], scores: Sequence[float], variant: Variant,
                   strata: Strata) -> tuple[float, dict[str, Any]]:
    """The logit threshold whose out-of-fold flags score best (``criterion``)."""
    candidates = sorted({round(s, 3) for s in scores if s > -math.inf})
    best: tuple[float, float, dict[str, Any]] | None = None
    for threshold in candidates[::max(1, len(candidates) // 400)]:
        scored = report(train, flags(train, scores, threshold, variant), strata)
        value = criterion(scored)
        if best is None or value > best[0]:
            best = (value, threshold, scored)
    assert best is not None
    return best[1], best[2]


@dataclass(frozen=True)
class Choice:
    variant: Variant
    l2: float
    threshold: float       # on the logit
    cv: dict[str, Any]     # the dev cross-validated report at that threshold


def cross_validate(train: Sequence[Example], strata: Strata, dim: int) -> list[Choice]:
    """The best regularisation and threshold of every variant, by dev cross-validation."""
    out = []
    fitted: dict[tuple[str, float], list[float]] = {}  # a union variant reuses its scores
    for variant in VARIANTS:
        best: Choice | None = None
        for l2 in L2_GRID:
            key = (variant.columns, l2)
            if key not in fitted:
                fitted[key] = out_of_fold(train, variant, l2, dim)
            scores = fitted[key]
            threshold, scored = best_threshold(train, scores, variant, strata)
            if best is None or criterion(scored) > criterion(best.cv):
                best = Choice(variant, l2, threshold, scored)
        assert best is not None
        out.append(best)
    return out


def train_final(train: Sequence[Example], choice: Choice, dim: int, model: str) -> Weights:
    """The chosen variant fitted on all of dev, as the shipped weights."""
    coef, bias = _fit_examples([e for e in train if e.eligible], choice.variant, choice.l2, dim)
    names = RULE_FEATURES if choice.variant.columns == "embedding+rules" else ()
    return Weights(model=model, dim=dim, rule_features=names, union=choice.variant.union,
                   coef=tuple(float(c) for c in coef), bias=bias, threshold=choice.threshold,
                   l2=choice.l2, trained_on="dev")
