"""The memory writer: after a turn, off the request path, learn from what the user said.

A turn enqueues its user message (``enqueue``: one row, idempotent per item). A worker
(``MemoryWriter.run``; ``threadline memory learn``) claims pending jobs with an expiring claim,
so a crashed worker's job is taken again, and for each one:

1. **extracts** candidates (``memory.extract``): by rules, and with a model if the writer has
   one, whose output is schema-checked (the validity rate is counted) and must quote the user;
2. **gates** them by the write policy: only the user's own message is learned from, so
   content from tools and documents never becomes memory, and anything shaped like an
   instruction to the assistant is never stored; oversized statements are turned away;
3. **decides** against the user's current entries: NOOP for one already known, UPDATE (the old
   entry invalidated, kept as history) for a new value of the same thing ("I live in …"),
   INVALIDATE for a retraction ("I no longer live in …"), ADD otherwise;
4. **keeps the turn**: the user's message itself, as said and dated (less any instruction), as
   a ``turn`` entry with the same provenance as the facts from it, so recall can find the
   evidence where no rule made a fact of it (a TURN decision); a revised or withdrawn
   statement takes its turn with it, kept as history;
5. **applies** the decisions, then marks the job done with every decision and its reason. A
   job retried after a crash in between finds what it added already there (NOOP), so learning
   an item twice changes nothing; a failure is recorded and retried up to ``MAX_ATTEMPTS``.

Each run ends with the retention purge: expired entries are deleted, not hidden.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from threadline.items import Item, ItemKind
from threadline.memory.dense import MemoryVectors
from threadline.memory.extract import (
    Candidate,
    Decision,
    key_of,
    model_candidates,
    planned_span,
    reject,
    rule_candidates,
    turn_text,
)
from threadline.memory.store import (
    TRUSTED_SOURCES,
    MemoryEntry,
    MemoryKind,
    MemoryStore,
    NewMemory,
    Source,
    memory_of,
)
from threadline.models.base import ModelBackend
from threadline.stores.base import Store
from threadline.stores.memory import JobClaim

MAX_ATTEMPTS = 3
CLAIM_S = 60.0


def enqueue(store: Store, item: Item, user_id: str) -> None:
    """Ask the writer to learn from ``item`` for ``user_id`` (again: a no-op)."""
    memory_of(store).enqueue(item.conversation_id, item.seq, user_id)


SPARSE_BELOW = 20  # current facts under which a user's memory is held to the strict gate


@dataclass(frozen=True)
class WritePolicy:
    """What may become memory beside what the user stated. Either way it is stored untrusted
    (recall weighs it at half), and an instruction is never stored, whoever wrote it.

    While a user's memory holds fewer than ``sparse_below`` current facts, only what the user
    stated is stored, whatever else the policy allows: in a near-empty store one planted
    record is most of what recall can find (the memory-injection results, MINJA, succeed
    best against small stores), so a store earns its wider gate by growing first."""

    tool_returned: bool = False   # statements in tool results
    model_inferred: bool = False  # facts a model extracted that do not quote the user
    sparse_below: int = SPARSE_BELOW

    def allows(self, source: Source, *, facts: int | None = None) -> bool:
        """Whether a candidate from ``source`` may be stored, for a user with ``facts``
        current facts (None: not counted, the wider gate)."""
        if source in TRUSTED_SOURCES:
            return True
        if facts is not None and facts < self.sparse_below:
            return False
        return (source is Source.TOOL_RETURNED and self.tool_returned) or \
            (source is Source.MODEL_INFERRED and self.model_inferred)


class MemoryWriter:
    """Learns from queued items under ``policy``; with ``model``, the model extractor runs
    beside the rules. The queue is ``store``'s memory (InputError if it keeps none)."""

    def __init__(self, store: Store, memory: MemoryStore, *,
                 model: ModelBackend | None = None, policy: WritePolicy = WritePolicy(),
                 vectors: MemoryVectors | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.memory, self.model, self.clock = store, memory, model, clock
        self.policy, self.vectors = policy, vectors
        self._queue = memory_of(store)

    def run(self, limit: int = 100) -> int:
        """Process up to ``limit`` pending jobs, embed what they added (with ``vectors``), then
        purge expired entries; how many jobs were done."""
        done = 0
        learned: set[str] = set()
        for conversation_id, seq, user_id in self._claim(limit):
            try:
                self._learn(conversation_id, seq, user_id)
                learned.add(user_id)
                done += 1
            except Exception as err:  # noqa: BLE001 - recorded on the job, retried later
                self._queue.fail(conversation_id, seq, f"{type(err).__name__}: {err}",
                                 MAX_ATTEMPTS)
        if self.vectors is not None:
            for user_id in sorted(learned):  # in a batch per user: the model is faster so
                self.vectors.embed_missing(user_id)
        self.memory.purge_expired()
        return done

    def jobs(self, status: str | None = None) -> list[dict[str, Any]]:
        return [job.to_json() for job in self._queue.jobs(status)]

    def stats(self) -> dict[str, Any]:
        """What the gate decided over every job, the jobs by status, and the model
        extractor's schema-validity rate (None when no model output was seen)."""
        jobs = self.jobs()
        decisions = [d for job in jobs for d in job["decisions"] or []]
        extracted = [d for d in decisions if d["decision"] == "EXTRACT"]
        valid = sum(1 for d in extracted if d["valid"])
        return {"jobs": len(jobs), "statuses": dict(Counter(job["status"] for job in jobs)),
                "decisions": dict(Counter(d["decision"] for d in decisions
                                          if d["decision"] != "EXTRACT")),
                "model_outputs": len(extracted), "schema_valid": valid,
                "schema_validity_rate": valid / len(extracted) if extracted else None}

    def _claim(self, limit: int) -> list[JobClaim]:
        """Pending jobs, each held for ``CLAIM_S``: a crashed worker's is taken again then."""
        now = self.clock()
        return self._queue.claim(now, now + CLAIM_S, limit)

    def _learn(self, conversation_id: str, seq: int, user_id: str) -> None:
        item = self.store.item(conversation_id, seq)
        limit = self.memory.max_text_bytes
        candidates, decisions = rule_candidates(item, max_bytes=limit)
        if self.model is not None and item.kind is ItemKind.USER:  # the gate's first rule
            found = model_candidates(self.store, self.model, item, max_bytes=limit,
                                     clock=self.memory.clock)
            decisions = found.decisions + decisions
            # where both found the same statement, the model's quote is the more precise
            quotes = [c.text.casefold() for c in found.candidates]
            candidates = found.candidates + [
                c for c in candidates
                if not any(q in c.text.casefold() or c.text.casefold() in q for q in quotes)]
        everything = self.memory.entries(user_id)
        turns = [e for e in everything if e.kind is MemoryKind.TURN]
        current = [e for e in everything if e.kind is not MemoryKind.TURN]
        for candidate in candidates:
            if not self.policy.allows(candidate.source, facts=len(current)):
                n = len(current)
                why = (f"the user's memory holds {n} fact{'' if n == 1 else 's'}, under "
                       f"{self.policy.sparse_below}: a sparse store keeps only what the user "
                       "stated") if self.policy.allows(candidate.source) else \
                    "the write policy stores only what the user stated"
                decisions.append(reject(candidate.text, f"{candidate.source}: {why}"))
                continue
            decisions.append(self._decide(user_id, candidate, item, current, turns))
        turn = self._keep_turn(user_id, item, turns)
        if turn is not None:
            decisions.append(turn)
        self._queue.finish(conversation_id, seq, decisions)

    def _keep_turn(self, user_id: str, item: Item, turns: list[MemoryEntry]) -> Decision | None:
        """The message itself, dated, as a ``turn`` entry: recall finds the evidence there
        when no rule made a fact of it, and shows it with the facts that came from it."""
        text = turn_text(item, max_bytes=self.memory.max_text_bytes)
        if text is None:
            return None
        if any(_same_origin(t, item.conversation_id, (item.seq,)) for t in turns):
            return {"text": text[:200], "decision": "NOOP", "reason": "the turn is kept already"}
        entry = self.memory.add(user_id, NewMemory(
            text, kind=MemoryKind.TURN, conversation_id=item.conversation_id,
            item_seqs=(item.seq,), recorded_at=item.created_at))
        turns.append(entry)
        return {"text": text[:200], "decision": "TURN", "entry": entry.id,
                "reason": "the message as said, for recall"}

    def _retire_turns(self, user_id: str, old: MemoryEntry, turns: list[MemoryEntry],
                      why: str) -> None:
        """A revised or withdrawn statement's turn stops being current with it (kept as
        history), so the old value cannot come back as what holds now."""
        for turn in [t for t in turns if _same_origin(t, old.conversation_id, old.item_seqs)]:
            self.memory.invalidate(user_id, turn.id, reason=why)
            turns.remove(turn)

    def _decide(self, user_id: str, candidate: Candidate, item: Item,
                current: list[MemoryEntry], turns: list[MemoryEntry]) -> Decision:
        same_key = None if candidate.key is None else next(
            (e for e in reversed(current) if key_of(e.text) == candidate.key), None)
        if candidate.retract:
            if same_key is None:
                return {"text": candidate.text, "decision": "NOOP",
                        "reason": f"nothing remembered about {candidate.key!r} to withdraw"}
            self.memory.invalidate(user_id, same_key.id,
                                   reason=f"the user withdrew it: {candidate.text}")
            self._retire_turns(user_id, same_key, turns,
                               f"the user withdrew what it said: {candidate.text}")
            current.remove(same_key)
            return {"text": candidate.text, "decision": "INVALIDATE", "entry": same_key.id,
                    "reason": f"a retraction of {candidate.key!r}"}
        same_text = next((e for e in current if e.text.casefold() == candidate.text.casefold()),
                         None)
        if same_text is not None:
            return {"text": candidate.text, "decision": "NOOP", "entry": same_text.id,
                    "reason": "already remembered"}
        span = planned_span(candidate.text, item.created_at)
        memory = NewMemory(candidate.text, source=candidate.source,
                           conversation_id=item.conversation_id, item_seqs=(item.seq,),
                           recorded_at=item.created_at, valid_from=span and span[0],
                           valid_to=span and span[1])
        if same_key is not None:
            entry = self.memory.update(user_id, same_key.id, memory,
                                       reason=f"the user said so again: {candidate.key}")
            self._retire_turns(user_id, same_key, turns,
                               f"a newer value of what it said: {candidate.text}")
            current.remove(same_key)
            current.append(entry)
            return {"text": candidate.text, "decision": "UPDATE", "entry": entry.id,
                    "replaces": same_key.id, "reason": f"a new value for {candidate.key!r}"}
        entry = self.memory.add(user_id, memory)
        current.append(entry)
        return {"text": candidate.text, "decision": "ADD", "entry": entry.id,
                "reason": f"a {candidate.source} fact"}



def _same_origin(entry: MemoryEntry, conversation_id: str | None,
                 item_seqs: tuple[int, ...]) -> bool:
    return conversation_id is not None and entry.conversation_id == conversation_id \
        and entry.item_seqs == tuple(item_seqs)
