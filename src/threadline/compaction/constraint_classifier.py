"""A classifier over sentence embeddings that finds standing constraints the rules miss.

Logistic regression over a sentence's MiniLM embedding (and, when the weights say so, the
rules' own verdicts on it as extra features), trained on the dev split of the hand
annotations (``eval/constraint_training.py``; figures in BENCHMARKS.md). A sentence counts
when its score passes the threshold chosen by cross-validation within dev, or, with
``union``, when the rules flag it anyway. Only the sentences the rules may look at are scored
(no questions, nothing over 400 characters), so everything the rules promise still holds.

The weights ship as JSON beside this module (``constraint_classifier.json``): a header with
the embedding model's name and dimension, then the coefficients. A file made for another
model is refused rather than scored with vectors it was never fitted on.

The embedding model is handed in (``Embed``): it lives with dense retrieval, above this
layer, and loads in seconds, so it is made at first use. If it cannot be made (PyTorch is
missing or broken), the detector logs that once and goes on with the rules alone.
"""

from __future__ import annotations

import json
import logging
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from threadline.compaction.constraint_rules import Verdict, eligible, verdicts
from threadline.errors import InputError

__all__ = ["FORMAT", "RULE_FEATURES", "WEIGHTS", "ClassifiedDetector", "Embed", "Weights",
           "eligible", "read_weights", "rule_features", "write_weights"]

log = logging.getLogger("threadline.compaction")

FORMAT = "threadline-constraint-classifier/1"
WEIGHTS = Path(__file__).with_name("constraint_classifier.json")
RULE_FEATURES = ("rule", "sets_up", "in_set_up_message", "directive", "in_ruled_message",
                 "after_rule")
CACHE_MESSAGES = 4096  # compaction re-reads every user message; each is embedded once


class Embed(Protocol):
    """A sentence-embedding model: its name, its vectors' dimension, texts → unit vectors."""

    name: str

    @property
    def dimension(self) -> int: ...

    def vectors(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


@dataclass(frozen=True)
class Weights:
    model: str                      # the embedding model the coefficients were fitted on
    dim: int                        # its vectors' dimension
    rule_features: tuple[str, ...]  # the rules' verdicts appended to the embedding, in order
    union: bool                     # also flag whatever the rules flag
    coef: tuple[float, ...]         # dim + len(rule_features) coefficients
    bias: float
    threshold: float                # on the logit
    l2: float                       # the regularisation it was fitted with
    trained_on: str                 # which annotations shaped it

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "model": self.model, "dim": self.dim,
                "rule_features": list(self.rule_features), "union": self.union,
                "threshold": self.threshold, "l2": self.l2, "trained_on": self.trained_on,
                "bias": self.bias, "coef": list(self.coef)}

    def logit(self, vector: Sequence[float], rules: dict[str, float]) -> float:
        features = [*vector, *(rules[name] for name in self.rule_features)]
        return math.fsum(c * f for c, f in zip(self.coef, features, strict=True)) + self.bias


def write_weights(path: Path, weights: Weights) -> None:
    path.write_text(json.dumps(weights.to_json(), indent=1) + "\n", "utf-8")


def read_weights(path: Path = WEIGHTS, *, model: str, dim: int) -> Weights:
    """The weights in ``path``, checked to be for ``model`` with ``dim``-dimensional vectors;
    InputError saying what is wrong otherwise."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except OSError as err:
        raise InputError(f"cannot read the constraint classifier's weights {path}: "
                         f"{err.strerror or err}") from err
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path} is not a constraint classifier weights file (not JSON)",
                         hint="retrain it with bench/constraint_classifier.py --write") from err
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{path} is not a constraint classifier weights file",
                         hint=f'its header must say "format": "{FORMAT}"')
    if data.get("model") != model or data.get("dim") != dim:
        raise InputError(f"{path} was made for the embedding model {data.get('model')!r} "
                         f"({data.get('dim')} dimensions), not {model!r} ({dim})",
                         hint="retrain it for this model with bench/constraint_classifier.py "
                              "--write, or turn the classifier off "
                              "(THREADLINE_CONSTRAINT_CLASSIFIER=0)")
    names = data.get("rule_features")
    coef = data.get("coef")
    if not (isinstance(names, list) and all(n in RULE_FEATURES for n in names)
            and isinstance(coef, list) and len(coef) == dim + len(names)
            and all(isinstance(c, int | float) for c in coef)
            and all(isinstance(data.get(k), int | float) for k in ("bias", "threshold", "l2"))
            and isinstance(data.get("union"), bool)):
        raise InputError(f"{path} is damaged: its coefficients do not match its header",
                         hint="retrain it with bench/constraint_classifier.py --write")
    return Weights(model=model, dim=dim, rule_features=tuple(names), union=data["union"],
                   coef=tuple(float(c) for c in coef), bias=float(data["bias"]),
                   threshold=float(data["threshold"]), l2=float(data["l2"]),
                   trained_on=str(data.get("trained_on", "")))


def rule_features(text: str) -> list[tuple[str, list[float]]]:
    """Each eligible sentence of ``text`` with the rules' verdicts on it (``RULE_FEATURES``)."""
    return [(v.sentence, list(row.values())) for v, row in _rule_rows(verdicts(text))]


def _rule_rows(found: Sequence[Verdict]) -> list[tuple[Verdict, dict[str, float]]]:
    set_up = float(any(v.sets_up for v in found))
    ruled = float(any(v.rule for v in found))
    return [(v, {"rule": float(v.rule), "sets_up": float(v.sets_up),
                 "in_set_up_message": set_up, "directive": float(v.directive),
                 "in_ruled_message": ruled,
                 "after_rule": float(n > 0 and found[n - 1].rule)})
            for n, v in enumerate(found)]


class ClassifiedDetector:
    """``detect`` with the classifier: a message's text → the sentences that set a standing
    constraint, verbatim, in order. ``make_embedder`` is called once, at first use."""

    def __init__(self, make_embedder: Callable[[], Embed], *, model: str, dim: int,
                 weights: Path = WEIGHTS) -> None:
        self.weights = read_weights(weights, model=model, dim=dim)
        self._make = make_embedder
        self._embedder: Embed | None = None
        self._failed = False
        self._cache: OrderedDict[str, list[str]] = OrderedDict()

    @property
    def active(self) -> bool:
        """False once the embedding model could not be made: the rules decide alone."""
        return not self._failed

    def __call__(self, text: str) -> list[str]:
        if text in self._cache:
            self._cache.move_to_end(text)
            return list(self._cache[text])
        found = verdicts(text)
        scores = self.scores(text, found)
        if scores is None:
            return [v.sentence for v in found if v.rule]
        flagged = [v.sentence for v, score in zip(found, scores, strict=True)
                   if (self.weights.union and v.rule) or score >= self.weights.threshold]
        self._cache[text] = flagged
        if len(self._cache) > CACHE_MESSAGES:
            self._cache.popitem(last=False)
        return list(flagged)

    def scores(self, text: str, found: Sequence[Verdict] | None = None) -> list[float] | None:
        """The classifier's logit for each eligible sentence of ``text`` (all of them embedded
        in one batch), or None when the embedding model is unavailable."""
        found = verdicts(text) if found is None else found
        if not found:
            return []
        embedder = self._embedder_or_none()
        if embedder is None:
            return None
        vectors = embedder.vectors([v.sentence for v in found])
        return [self.weights.logit(vector, rules)
                for vector, (_, rules) in zip(vectors, _rule_rows(found), strict=True)]

    def _embedder_or_none(self) -> Embed | None:
        if self._embedder is None and not self._failed:
            try:
                embedder = self._make()
            except (ImportError, OSError, InputError) as err:
                self._failed = True
                log.warning("constraint classifier off, the rules decide alone: the embedding "
                            "model could not be loaded (%s); install it with: "
                            "pip install 'threadline[dense]'", err)
                return None
            if embedder.name != self.weights.model or embedder.dimension != self.weights.dim:
                raise InputError(f"the embedding model {embedder.name!r} "
                                 f"({embedder.dimension} dimensions) is not the one the "
                                 f"constraint classifier was trained on "
                                 f"({self.weights.model!r}, {self.weights.dim})")
            self._embedder = embedder
        return self._embedder
