"""Standing-constraint detection against the hand annotations: precision and recall per split.

A detector is scored sentence by sentence on the annotated sentences of one split (see
``constraint_annotations``). Counts are given twice:

- ``annotated``: over the sentences read (every candidate and the 4% sample of the rest);
- ``estimated``: each sampled sentence weighted by the non-candidates it stands for (about
  25), which is what the figures mean for the whole corpus. Precision and recall are computed
  from the estimated counts.

Per-label recall says which kinds of rule are found; ``one_off_flagged`` says how many of the
near-misses (one-off requests that read like rules) the detector takes for rules.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.errors import InputError
from threadline.eval.constraint_annotations import POSITIVE, Annotated, Strata, source_of
from threadline.eval.constraint_corpus import SPLITS

# a detector under evaluation: a message's text → the sentences it flags, verbatim
Detector = Callable[[str], Sequence[str]]


@dataclass(frozen=True)
class Scored:
    annotated: Annotated
    flagged: bool


def flag(annotated: Sequence[Annotated], detect: Detector,
         messages: dict[tuple[str, str, int], str]) -> tuple[list[Scored], float]:
    """Run ``detect`` once per message that holds an annotated sentence; a sentence is flagged
    when the detector returns its text. Returns the verdicts and the milliseconds spent."""
    by_message: dict[tuple[str, str, int], list[Annotated]] = {}
    for item in annotated:
        s = item.sentence
        by_message.setdefault((s.file, s.conversation, s.index), []).append(item)
    out: list[Scored] = []
    elapsed = 0.0
    for key, items in by_message.items():
        text = messages[key]
        started = time.perf_counter()
        found = set(detect(text))
        elapsed += time.perf_counter() - started
        out.extend(Scored(item, item.sentence.text in found) for item in items)
    return out, elapsed * 1000


def score(scored: Sequence[Scored], strata: Strata, split: str) -> dict[str, Any]:
    if split not in SPLITS:
        raise InputError(f"unknown split {split!r}", hint=f"one of: {', '.join(SPLITS)}")
    raw: Counter[str] = Counter()
    est: Counter[str] = Counter()
    labels: dict[str, Counter[str]] = {}
    for item in scored:
        a = item.annotated
        if a.sentence.split != split:
            continue
        weight = 1.0 if a.stratum == "candidate" else strata.weight(split,
                                                                    source_of(a.sentence.file))
        outcome = ("tp" if item.flagged else "fn") if a.positive else \
            ("fp" if item.flagged else "tn")
        raw[outcome] += 1
        est[outcome] += weight  # type: ignore[assignment]
        if a.positive:
            per = labels.setdefault(a.label, Counter())
            per["rules"] += 1
            per["found"] += item.flagged
        elif a.label == "one_off":
            raw["one_off"] += 1
            raw["one_off_flagged"] += item.flagged
    precision = est["tp"] / (est["tp"] + est["fp"]) if est["tp"] + est["fp"] else None
    recall = est["tp"] / (est["tp"] + est["fn"]) if est["tp"] + est["fn"] else None
    return {
        "split": split,
        "precision": _round(precision),
        "recall": _round(recall),
        "f1": _round(2 * precision * recall / (precision + recall))
        if precision and recall else None,
        "annotated": {k: raw[k] for k in ("tp", "fp", "fn", "tn")},
        "estimated": {k: round(est[k], 1) for k in ("tp", "fp", "fn", "tn")},
        "rules_annotated": raw["tp"] + raw["fn"],
        "per_label_recall": {label: {"rules": labels[label]["rules"],
                                     "found": labels[label]["found"],
                                     "recall": _round(labels[label]["found"]
                                                      / labels[label]["rules"])}
                             for label in POSITIVE if label in labels},
        "one_off": {"annotated": raw["one_off"], "flagged": raw["one_off_flagged"]},
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
