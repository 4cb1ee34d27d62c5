"""The intent classifier: how likely a request is one the policy forbids, from its meaning.

The policy's examples (``policy.toml``) are a few requests per kind of harm, so a request
about a harm they do not name sits far from all of them. Here a logistic regression over the
shipped MiniLM embeddings learns the line between forbidden requests and look-alikes from a
broader set (``intent.toml``: a taxonomy of harms, and care, teaching, fiction, defence and
everyday requests that sound alike), fitted when the embedding detector first runs. The fit
is deterministic (``threadline.logistic``) and takes milliseconds; embedding the examples
takes a second or two, once a process.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from threadline.logistic import fit

L2 = 0.01  # the regularisation of the fit (chosen on the dev and seen scripts)


@dataclass(frozen=True)
class IntentExamples:
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...]

    @classmethod
    def default(cls) -> IntentExamples:
        text = files("threadline.providers.monitor").joinpath("intent.toml").read_text("utf-8")
        found = tomllib.loads(text)
        return cls(tuple(found["forbidden"]), tuple(found["allowed"]))


class IntentClassifier:
    """P(forbidden | a request's unit embedding), fitted on ``examples`` embedded by
    ``embed``."""

    def __init__(self, embed: Callable[[list[str]], Sequence[Any]],
                 examples: IntentExamples | None = None) -> None:
        import numpy as np

        examples = examples or IntentExamples.default()
        texts = [*examples.forbidden, *examples.allowed]
        x = np.stack(embed(texts))
        y = np.array([1.0] * len(examples.forbidden) + [0.0] * len(examples.allowed))
        # each class weighs the same, however many examples it has
        w = np.where(y == 1, 1 / len(examples.forbidden), 1 / len(examples.allowed))
        self.coef, self.bias = fit(x, y, w, L2)

    def probability(self, vector: Any) -> float:
        import numpy as np

        return float(1 / (1 + np.exp(-(float(vector @ self.coef) + self.bias))))
