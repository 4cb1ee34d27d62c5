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
4. **applies** the decisions, then marks the job done with every decision and its reason. A
   job retried after a crash in between finds what it added already there (NOOP), so learning
   an item twice changes nothing; a failure is recorded and retried up to ``MAX_ATTEMPTS``.

Each run ends with the retention purge: expired entries are deleted, not hidden.
"""

from __future__ import annotations

import json
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
)
from threadline.memory.store import (
    TRUSTED_SOURCES,
    MemoryEntry,
    MemoryStore,
    NewMemory,
    Source,
)
from threadline.models.base import ModelBackend
from threadline.stores.relational import RelationalStore, Session

MAX_ATTEMPTS = 3
CLAIM_S = 60.0


def enqueue(store: RelationalStore, item: Item, user_id: str) -> None:
    """Ask the writer to learn from ``item`` for ``user_id`` (again: a no-op)."""
    with store.session(write=True) as db:
        db.run("INSERT INTO memory_jobs (conversation_id, seq, user_id) VALUES (?, ?, ?) "
               "ON CONFLICT (conversation_id, seq) DO NOTHING",
               (item.conversation_id, item.seq, user_id))


@dataclass(frozen=True)
class WritePolicy:
    """What may become memory beside what the user stated. Either way it is stored untrusted
    (recall weighs it at half), and an instruction is never stored, whoever wrote it."""

    tool_returned: bool = False   # statements in tool results
    model_inferred: bool = False  # facts a model extracted that do not quote the user

    def allows(self, source: Source) -> bool:
        return source in TRUSTED_SOURCES or (source is Source.TOOL_RETURNED and
                                             self.tool_returned) or \
            (source is Source.MODEL_INFERRED and self.model_inferred)


class MemoryWriter:
    """Learns from queued items under ``policy``; with ``model``, the model extractor runs
    beside the rules."""

    def __init__(self, store: RelationalStore, memory: MemoryStore, *,
                 model: ModelBackend | None = None, policy: WritePolicy = WritePolicy(),
                 vectors: MemoryVectors | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.memory, self.model, self.clock = store, memory, model, clock
        self.policy, self.vectors = policy, vectors

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
                with self.store.session(write=True) as db:
                    db.run("UPDATE memory_jobs SET error = ?, claimed_until = NULL, status = "
                           "CASE WHEN attempts >= ? THEN 'failed' ELSE 'pending' END "
                           "WHERE conversation_id = ? AND seq = ?",
                           (f"{type(err).__name__}: {err}", MAX_ATTEMPTS, conversation_id,
                            seq))
        if self.vectors is not None:
            for user_id in sorted(learned):  # in a batch per user: the model is faster so
                self.vectors.embed_missing(user_id)
        self.memory.purge_expired()
        return done

    def jobs(self, status: str | None = None) -> list[dict[str, Any]]:
        sql = ("SELECT conversation_id, seq, user_id, status, attempts, decisions, error "
               "FROM memory_jobs")
        with self.store.session() as db:
            rows = db.all(sql + (" WHERE status = ?" if status else "")
                          + " ORDER BY conversation_id, seq", (status,) if status else ())
        return [{"conversation_id": r[0], "seq": r[1], "user_id": r[2], "status": r[3],
                 "attempts": r[4], "decisions": json.loads(r[5]) if r[5] else None,
                 "error": r[6]} for r in rows]

    def stats(self) -> dict[str, Any]:
        """What the gate decided over every job, and the model extractor's schema-validity
        rate (None when no model output was seen)."""
        jobs = self.jobs()
        decisions = [d for job in jobs for d in job["decisions"] or []]
        extracted = [d for d in decisions if d["decision"] == "EXTRACT"]
        valid = sum(1 for d in extracted if d["valid"])
        return {"jobs": len(jobs),
                "decisions": dict(Counter(d["decision"] for d in decisions
                                          if d["decision"] != "EXTRACT")),
                "model_outputs": len(extracted), "schema_valid": valid,
                "schema_validity_rate": valid / len(extracted) if extracted else None}

    def _claim(self, limit: int) -> list[tuple[str, int, str]]:
        now = self.clock()
        with self.store.session(write=True) as db:
            rows = db.all("SELECT conversation_id, seq, user_id FROM memory_jobs WHERE "
                          "status = 'pending' AND (claimed_until IS NULL OR claimed_until < ?)"
                          " ORDER BY conversation_id, seq LIMIT ?", (now, limit))
            claimed = []
            for conversation_id, seq, user_id in rows:
                if db.run("UPDATE memory_jobs SET claimed_until = ?, attempts = attempts + 1 "
                          "WHERE conversation_id = ? AND seq = ? AND status = 'pending' AND "
                          "(claimed_until IS NULL OR claimed_until < ?)",
                          (now + CLAIM_S, conversation_id, seq, now)):
                    claimed.append((conversation_id, int(seq), user_id))
        return claimed

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
        current = self.memory.entries(user_id)
        for candidate in candidates:
            if not self.policy.allows(candidate.source):
                decisions.append(reject(candidate.text, f"{candidate.source}: the write "
                                        "policy stores only what the user stated"))
                continue
            decisions.append(self._decide(user_id, candidate, item, current))
        with self.store.session(write=True) as db:
            _finish(db, conversation_id, seq, decisions)

    def _decide(self, user_id: str, candidate: Candidate, item: Item,
                current: list[MemoryEntry]) -> Decision:
        same_key = None if candidate.key is None else next(
            (e for e in reversed(current) if key_of(e.text) == candidate.key), None)
        if candidate.retract:
            if same_key is None:
                return {"text": candidate.text, "decision": "NOOP",
                        "reason": f"nothing remembered about {candidate.key!r} to withdraw"}
            self.memory.invalidate(user_id, same_key.id,
                                   reason=f"the user withdrew it: {candidate.text}")
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
            current.remove(same_key)
            current.append(entry)
            return {"text": candidate.text, "decision": "UPDATE", "entry": entry.id,
                    "replaces": same_key.id, "reason": f"a new value for {candidate.key!r}"}
        entry = self.memory.add(user_id, memory)
        current.append(entry)
        return {"text": candidate.text, "decision": "ADD", "entry": entry.id,
                "reason": f"a {candidate.source} fact"}


def _finish(db: Session, conversation_id: str, seq: int, decisions: list[Decision]) -> None:
    db.run("UPDATE memory_jobs SET status = 'done', claimed_until = NULL, error = NULL, "
           "decisions = ? WHERE conversation_id = ? AND seq = ?",
           (json.dumps(decisions, ensure_ascii=False), conversation_id, seq))
