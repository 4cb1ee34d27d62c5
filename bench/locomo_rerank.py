"""Fit the rerank's logistic model (``memory/rank.py``: ``DENSE_MODEL``, ``LEXICAL_MODEL``) on
LoCoMo's dev conversations, and say how well it ranks on a conversation it was not fitted on.

    .venv/bin/python bench/locomo_rerank.py [FILE] [--l2 1.0] [--json]

Reads the dev samples only (conv-26, conv-30; the split is ``eval/locomo_report.py``'s); test
is never read. Each is ingested as ``threadline eval locomo`` does, every scored question is
asked through recall's own path (``MemoryRecall.scored``) of the speakers it names, and each
candidate is labelled by whether its provenance holds an evidence turn. The model is fitted by
L2 logistic regression (``threadline/logistic.py``) on standardised features, and printed on
the raw features, as ``rank.py`` holds it. Held out: fitted on one conversation, evidence
recall@5/@10 on the other (abstention as recall decides it), against the first pass alone
(the weighted sum) and against the model ``rank.py`` ships.

Needs ../shared/data/locomo (CC BY-NC: read in place for evaluation only) and the dense extra.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from threadline.eval.locomo import ingest, load_locomo, speakers_named
from threadline.eval.locomo_report import ADVERSARIAL, CATEGORIES, split_of
from threadline.logistic import fit
from threadline.memory.rank import DENSE_MODEL, FEATURES, LEXICAL_MODEL, Candidate, Model
from threadline.memory.recall import MemoryRecall
from threadline.retrieval.dense import Embedder
from threadline.rewrite import DETERMINISTIC, race
from threadline.stores.sqlite import SQLiteStore

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo" / \
    "locomo_first5.json"
KS = (5, 10)
# a model of zeros: recall computes every feature, and its own score does not matter here
ZERO = Model(**{f.name: 0.0 for f in fields(Model)})


@dataclass
class Asked:
    """One scored question, with every candidate of each speaker it names."""

    sample: str
    category: int
    evidence: set[str]
    candidates: dict[str, list[Candidate]]  # by speaker
    dia: dict[int, list[str]]               # id(candidate) → its evidence turns (dia_ids)
    kept: dict[str, set[int]]               # by speaker: the candidates recall may show


def collect(path: Path, embedder: Embedder) -> dict[str, list[Asked]]:
    """Every scored dev question, asked with embeddings (dense) and without (lexical)."""
    samples = [s for s in load_locomo(path) if split_of(s.id) == "dev"]
    if not samples:
        raise SystemExit(f"{path}: no dev samples")
    asked: dict[str, list[Asked]] = {"dense": [], "lexical": []}
    with tempfile.TemporaryDirectory(prefix="threadline-rerank-") as scratch:
        for sample in samples:
            store = SQLiteStore(Path(scratch) / f"{sample.id}.db")
            try:
                read = ingest(sample, store, embedder)
                recalls = {"dense": MemoryRecall(read.memory, dense=read.vectors, model=ZERO),
                           "lexical": MemoryRecall(read.memory, model=ZERO)}
                known = {t.dia_id for t in sample.turns}
                for question in sample.questions:
                    evidence = {e for e in question.evidence if e in known}
                    if question.category == ADVERSARIAL or not evidence:
                        continue
                    query = race([DETERMINISTIC], (), question.text).rewritten
                    for name, recall in recalls.items():
                        one = Asked(sample.id, question.category, evidence, {}, {}, {})
                        for speaker in speakers_named(question.text, sample.speakers):
                            found = recall.scored(speaker, query, ignore=[speaker]).candidates
                            one.candidates[speaker] = found
                            one.kept[speaker] = {id(c) for c in recall.shown(found)}
                            for c in found:
                                one.dia[id(c)] = [read.seqs[s] for s in
                                                  c.shown.entry().item_seqs if s in read.seqs]
                        asked[name].append(one)
            finally:
                store.close()
    return asked


def rows(asked: Sequence[Asked]) -> tuple[Any, Any]:
    x, y = [], []
    for one in asked:
        for found in one.candidates.values():
            for c in found:
                x.append(c.features())
                y.append(float(bool(set(one.dia[id(c)]) & one.evidence)))
    return np.array(x, dtype=np.float64), np.array(y, dtype=np.float64)


def fitted(asked: Sequence[Asked], l2: float) -> Model:
    """The L2 logistic model, fitted on standardised features, on the raw ones."""
    x, y = rows(asked)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0  # a feature that never varies (similarity, lexically) weighs 0
    weights, intercept = fit((x - mean) / scale, y, np.ones(len(y)), l2)
    raw = weights / scale
    return Model(**dict(zip(FEATURES, (round(float(w), 4) for w in raw), strict=True)),
                 intercept=round(float(intercept - raw @ mean), 4))


def recall_at(asked: Sequence[Asked], rank: Callable[[Candidate], float]) -> dict[str, Any]:
    """Evidence recall@k as ``eval locomo`` counts it: each speaker's shown candidates,
    merged by score, the best k."""
    by: dict[str, list[float]] = {}
    for one in asked:
        shown = sorted(((rank(c), c) for speaker, found in one.candidates.items()
                        for c in found if id(c) in one.kept[speaker]),
                       key=lambda pair: -pair[0])
        for k in KS:
            covered = {d for _, c in shown[:k] for d in one.dia[id(c)]}
            share = len(covered & one.evidence) / len(one.evidence)
            for key in ("all", CATEGORIES[one.category], one.sample):
                by.setdefault(f"{key}@{k}", []).append(share)
    return {key: round(sum(v) / len(v), 4) for key, v in sorted(by.items())}


def first_pass(c: Candidate) -> float:
    return c.prior


def model_score(model: Model) -> Callable[[Candidate], float]:
    return lambda c: model.probability(c.features())


def held_out(models: dict[int, Model]) -> Callable[[Candidate], float]:
    """Each candidate scored by the model fitted without its conversation."""
    return lambda c: models[id(c)].probability(c.features())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DATA)
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    shipped = {"dense": DENSE_MODEL, "lexical": LEXICAL_MODEL}
    for name, asked in collect(args.file, Embedder()).items():
        conversations = sorted({a.sample for a in asked})
        # each conversation ranked by the model fitted without it
        other = {out: fitted([a for a in asked if a.sample != out], args.l2)
                 for out in conversations}
        by_candidate = {id(c): other[a.sample] for a in asked
                     for found in a.candidates.values() for c in found}
        model = fitted(asked, args.l2)
        report[name] = {
            "questions": len(asked),
            "held_out": {"first_pass": recall_at(asked, first_pass),
                         "model": recall_at(asked, held_out(by_candidate)),
                         "fitted_without": {out: m.__dict__ for out, m in other.items()}},
            "fitted_on_dev": {"first_pass": recall_at(asked, first_pass),
                              "model": recall_at(asked, model_score(model)),
                              "shipped": recall_at(asked, model_score(shipped[name]))},
            "model": model.__dict__}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for name, part in report.items():
        print(f"{name}: {part['questions']} scored dev questions")
        for label in ("first_pass", "model"):
            f = part["held_out"][label]
            print(f"  held out ({label}): recall@5 {f['all@5']:.3f} recall@10 "
                  f"{f['all@10']:.3f} " + " ".join(
                      f"{k} {v:.3f}" for k, v in f.items() if k.endswith("@10")))
        f = part["fitted_on_dev"]["shipped"]
        print(f"  shipped, on dev: recall@5 {f['all@5']:.3f} recall@10 {f['all@10']:.3f}")
        print(f"  {name.upper()}_MODEL = Model(" + ", ".join(
            f"{k}={v}" for k, v in part["model"].items()) + ")")


if __name__ == "__main__":
    main()
