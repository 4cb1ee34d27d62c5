"""What ``eval/locomo.py`` measures, per question, and the figures it adds up to: by split
(dev: conversations fixed before any tuning; test: the rest, never tuned on), by category,
at each k, with tokens against the full context and latency against the raw query."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# LoCoMo's categories, as its authors' evaluation scores them (see the data's SOURCE.md)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
              5: "adversarial"}
ADVERSARIAL = 5
# the split, fixed before any of recall's steps was tuned: conversations 1-2 of LoCoMo-10 are
# dev (every weight and threshold was chosen on them); every other sample is test
DEV = frozenset({"conv-26", "conv-30"})
KS = (5, 10)


def split_of(sample_id: str) -> str:
    return "dev" if sample_id in DEV else "test"


@dataclass(frozen=True)
class Asked:
    """One question through one arm."""

    split: str
    category: int
    recall: dict[int, float] | None  # share of the evidence in the context, by k
    tokens: dict[int, int]           # the context's tokens, by k
    abstained: bool                  # the context said nothing bears on it


@dataclass
class Arm:
    asked: list[Asked] = field(default_factory=list)
    recall_ms: list[float] = field(default_factory=list)
    raw_query_ms: list[float] = field(default_factory=list)
    stages_ms: dict[str, list[float]] = field(default_factory=dict)

    def to_json(self, full_tokens: dict[str, int], ks: Sequence[int]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for split in sorted({a.split for a in self.asked}) + ["all"]:
            mine = [a for a in self.asked if split in ("all", a.split)]
            full = sum(full_tokens.values()) if split == "all" else full_tokens[split]
            out[split] = _figures(mine, full, ks)
        if self.recall_ms:
            out["latency"] = _latency(self.recall_ms, self.raw_query_ms, self.stages_ms)
        return out


def _figures(asked: Sequence[Asked], full: int, ks: Sequence[int]) -> dict[str, Any]:
    scored = [a for a in asked if a.recall is not None]
    adversarial = [a for a in asked if a.category == ADVERSARIAL]
    by_category: dict[str, Any] = {}
    for number, name in CATEGORIES.items():
        theirs = [a for a in scored if a.category == number]
        if theirs:
            by_category[name] = {"questions": len(theirs), **{
                f"recall@{k}": _mean(a.recall[k] for a in theirs if a.recall) for k in ks}}
    return {
        "questions": len(asked), "scored": len(scored),
        **{f"recall@{k}": _mean(a.recall[k] for a in scored if a.recall) for k in ks},
        "by_category": by_category,
        **{f"tokens@{k}": _mean(a.tokens[k] for a in asked) for k in ks},
        **{f"tokens_vs_full@{k}": round(sum(a.tokens[k] for a in asked) / full, 4)
           if full else None for k in ks},
        "adversarial_abstained": _mean(a.abstained for a in adversarial),
        "false_abstention": _mean(a.abstained for a in scored)}


def _mean(values: Any) -> float | None:
    found = [float(v) for v in values]
    return round(statistics.fmean(found), 4) if found else None


def _latency(recall: list[float], raw: list[float],
             stages: dict[str, list[float]]) -> dict[str, Any]:
    p = percentile
    out: dict[str, Any] = {}
    for pct in (50, 95, 99):
        out[f"recall_p{pct}_ms"], out[f"raw_query_p{pct}_ms"] = p(recall, pct), p(raw, pct)
        out[f"p{pct}_ratio"] = _ratio(p(recall, pct), p(raw, pct))
    out["stages_p50_ms"] = {name: p(values, 50) for name, values in stages.items()}
    out["stages_p50_vs_raw_query"] = {name: _ratio(p(values, 50), p(raw, 50))
                                      for name, values in stages.items()}
    return out


def percentile(values: Sequence[float], pct: int) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))], 3)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 2)
