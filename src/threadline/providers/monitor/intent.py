"""The intent classifier: how likely a request is one the policy forbids, from its meaning.

The policy's examples (``policy.toml``) are a few requests per kind of harm, so a request
about a harm they do not name sits far from all of them. Here a logistic regression over the
shipped MiniLM embeddings learns the line between forbidden requests and look-alikes from a
broader set (``intent.toml``: a taxonomy of harms, and, on the same subjects, the protective,
professional, teaching, fiction and everyday requests that sound alike, with ordinary
mid-conversation follow-ups, since every turn is scored).

Far from every forbidden example (ordinary chat: code, marketing, a thank-you) the
probability is an extrapolation, so the classifier also reports a request's reach: its cosine
to the nearest forbidden example, which the embedding detector can require
(``embeddings.GENERAL_CHAT_REACH``).

The fit is deterministic (``threadline.logistic``). Embedding the examples takes seconds, so
the coefficients fitted on the shipped examples, and the forbidden examples' vectors (as
bytes), ship beside them (``intent.json``, written by
``bench/intent_classifier.py --write``), with the embedding model's name and a digest of the
examples they were fitted on; other examples (an application's own), another model, or a
missing or damaged file are fitted in the process instead, once, and the log says why.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from threadline.logistic import fit

log = logging.getLogger("threadline.monitor")

FORMAT = "threadline-intent-classifier/2"  # 2: with the forbidden examples' vectors
WEIGHTS = Path(__file__).with_name("intent.json")
L2 = 0.1  # the regularisation of the fit (chosen on the tuning splits: docs/safety.md)


@dataclass(frozen=True)
class IntentExamples:
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...]

    @classmethod
    def default(cls) -> IntentExamples:
        text = files("threadline.providers.monitor").joinpath("intent.toml").read_text("utf-8")
        found = tomllib.loads(text)
        return cls(tuple(found["forbidden"]), tuple(found["allowed"]))

    def digest(self) -> str:
        """What a fit depends on besides the model: the examples, in order, and ``L2``."""
        parts = [f"l2={L2!r}", *("+" + t for t in self.forbidden),
                 *("-" + t for t in self.allowed)]
        return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


class IntentClassifier:
    """P(forbidden | a request's unit embedding), and how near a request comes to the
    forbidden examples it learnt from (``reach``)."""

    def __init__(self, coef: Any, bias: float, forbidden: Any = None) -> None:
        import numpy as np

        self.coef, self.bias = np.asarray(coef, dtype=np.float64), float(bias)
        # the forbidden examples' unit vectors (None: no reach known, every request in it)
        self.forbidden = None if forbidden is None else np.asarray(forbidden, dtype=np.float32)

    @classmethod
    def fitted(cls, embed: Callable[[list[str]], Sequence[Any]],
               examples: IntentExamples | None = None) -> IntentClassifier:
        """Fitted on ``examples`` (default: the shipped ones) embedded by ``embed``."""
        import numpy as np

        examples = examples or IntentExamples.default()
        x = np.stack(embed([*examples.forbidden, *examples.allowed]))
        y = np.array([1.0] * len(examples.forbidden) + [0.0] * len(examples.allowed))
        # each class weighs the same, however many examples it has
        w = np.where(y == 1, 1 / len(examples.forbidden), 1 / len(examples.allowed))
        return cls(*fit(x, y, w, L2), forbidden=x[:len(examples.forbidden)])

    @classmethod
    def shipped(cls, embed: Callable[[list[str]], Sequence[Any]], *, model: str | None,
                dim: int | None, examples: IntentExamples | None = None,
                weights: Path = WEIGHTS) -> IntentClassifier:
        """The shipped coefficients where they were fitted on ``examples`` (default: the
        shipped ones) with ``model``'s ``dim``-dimensional vectors; otherwise fitted here."""
        examples = examples or IntentExamples.default()
        data, why = _read(weights, examples.digest(), model, dim)
        if data is not None:
            return cls(data["coef"], data["bias"], data["forbidden"])
        log.info("fitting the monitor's intent classifier (%d examples): %s",
                 len(examples.forbidden) + len(examples.allowed), why)
        return cls.fitted(embed, examples)

    def probability(self, vector: Any) -> float:
        import numpy as np

        return float(1 / (1 + np.exp(-(float(vector @ self.coef) + self.bias))))

    def reach(self, vector: Any) -> float:
        """The cosine of a unit vector to the nearest forbidden example (1.0 where the
        examples' vectors are not known)."""
        return 1.0 if self.forbidden is None else float((self.forbidden @ vector).max())

    def write(self, path: Path, *, model: str, examples: IntentExamples) -> None:
        data = {"format": FORMAT, "model": model, "dim": len(self.coef), "l2": L2,
                "examples": {"forbidden": len(examples.forbidden),
                             "allowed": len(examples.allowed),
                             "digest": examples.digest()},
                "bias": self.bias, "coef": [float(c) for c in self.coef],
                "forbidden_vectors": None if self.forbidden is None else _packed(self.forbidden)}
        path.write_text(json.dumps(data, indent=1) + "\n", "utf-8")


def _read(path: Path, digest: str, model: str | None, dim: int | None
          ) -> tuple[dict[str, Any] | None, str]:
    """The weights in ``path`` where they can stand for a fit of the examples with
    ``digest`` by ``model``, else None and why not."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except OSError as err:
        return None, f"no weights at {path} ({err.strerror or err})"
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None, f"{path} is not JSON"
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None, f"{path} is not an intent classifier weights file"
    if model is None or data.get("model") != model or data.get("dim") != dim:
        return None, f"{path} was fitted with {data.get('model')!r}, not {model!r}"
    if (data.get("examples") or {}).get("digest") != digest:
        return None, f"{path} was fitted on other examples"
    coef = data.get("coef")
    if not (isinstance(coef, list) and len(coef) == dim
            and all(isinstance(c, int | float) for c in coef)
            and isinstance(data.get("bias"), int | float)):
        return None, f"{path} is damaged: its coefficients do not match its header"
    try:  # decoded once, here
        forbidden = _vectors(data.get("forbidden_vectors"), dim,
                             rows=data["examples"].get("forbidden"))
    except (TypeError, ValueError, KeyError, binascii.Error):
        return None, f"{path} is damaged: its forbidden examples' vectors do not match it"
    return {**data, "forbidden": forbidden}, ""


# the forbidden examples' vectors ship as signed bytes (cosines within about 0.01 of the
# float ones): a quarter of the floats' size, and no embedding of 600 texts at start-up
_SCALE = 127.0


def _packed(vectors: Any) -> dict[str, Any]:
    import numpy as np

    quantised = np.clip(np.rint(vectors * _SCALE), -127, 127).astype(np.int8)
    return {"rows": int(vectors.shape[0]), "scale": _SCALE,
            "int8": base64.b64encode(quantised.tobytes()).decode("ascii")}


def _vectors(packed: Any, dim: int | None, *, rows: Any = None) -> Any:
    """The unit vectors ``_packed`` wrote; ValueError where they do not fit ``dim``."""
    import numpy as np

    if not isinstance(packed, dict) or not isinstance(packed.get("int8"), str) or dim is None:
        raise ValueError("no vectors")
    n, scale = packed.get("rows"), packed.get("scale")
    raw = np.frombuffer(base64.b64decode(packed["int8"], validate=True), dtype=np.int8)
    if not isinstance(n, int) or n < 1 or raw.size != n * dim or (rows is not None and n != rows) \
            or not isinstance(scale, int | float) or scale <= 0:
        raise ValueError("the vectors do not fit their header")
    vectors = raw.reshape(n, dim).astype(np.float32) / float(scale)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-9)
