"""The memory writer: after a turn, off the request path, learn from what the user said.

A turn enqueues its user message (``enqueue``: one row, idempotent per item). A worker
(``MemoryWriter.run``; ``threadline memory learn``) claims pending jobs with an expiring claim,
so a crashed worker's job is taken again, and for each one:

1. **extracts** candidates, without a model: first-person statements of fact or preference in a
   user message ("I live in Oslo", "my daughter is called Mia", "I prefer metric units");
2. **gates** them by the write policy: only user-stated content becomes trusted memory;
   anything shaped like an instruction to the assistant is never stored as memory;
3. **decides** against the user's current entries: NOOP for one already known, UPDATE (the old
   entry invalidated, kept as history) for a new value of the same thing ("I live in …"), ADD
   otherwise;
4. **applies** the decisions, then marks the job done with every decision and its reason. A
   job retried after a crash in between finds what it added already there (NOOP), so learning
   an item twice changes nothing; a failure is recorded and retried up to ``MAX_ATTEMPTS``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from threadline.items import Item, ItemKind
from threadline.memory.store import MemoryStore, NewMemory, Source
from threadline.stores.relational import RelationalStore, Session

MAX_ATTEMPTS = 3
CLAIM_S = 60.0

# first-person statements worth remembering; the group is what they are about (their "key")
_STATEMENTS = [re.compile(pattern, re.IGNORECASE) for pattern in (
    r"\bI(?: a|')m (?:(?:a|an) )?(vegetarian|vegan|allergic to \w+|\w+ years old)\b",
    r"\bI (live|work|grew up|was born) (?:in|at|for) ",
    r"\bmy (\w+(?: \w+)?) (?:is|are|was) ",
    r"\bI (prefer|like|love|hate|dislike|don'?t like|use|own|have) ",
    r"\b(?:call me|my name is) ",
    r"\bI(?: a|')m (going|moving|travelling|traveling|flying) to ",
)]
_INSTRUCTION = re.compile(r"^\s*(?:please\s+)?(?:always|never|ignore|forget|remember to|send|"
                          r"delete|do not|don'?t)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


@dataclass(frozen=True)
class Candidate:
    text: str
    key: str  # what it is about: a later statement with the same key replaces it


def enqueue(store: RelationalStore, item: Item, user_id: str) -> None:
    """Ask the writer to learn from ``item`` for ``user_id`` (again: a no-op)."""
    with store.session(write=True) as db:
        db.run("INSERT INTO memory_jobs (conversation_id, seq, user_id) VALUES (?, ?, ?) "
               "ON CONFLICT (conversation_id, seq) DO NOTHING",
               (item.conversation_id, item.seq, user_id))


def extract(item: Item) -> tuple[list[Candidate], list[dict[str, str]]]:
    """Candidates from a user message, and what was turned away (with why)."""
    if item.kind is not ItemKind.USER:
        return [], [{"text": item.text[:120], "decision": "REJECT",
                     "reason": f"a {item.kind} is not the user's own statement"}]
    found, refused = [], []
    for sentence in (" ".join(s.split()) for s in _SENTENCE.findall(item.text)):
        if not sentence:
            continue
        if _INSTRUCTION.match(sentence):
            refused.append({"text": sentence, "decision": "REJECT",
                            "reason": "an instruction, not a fact: never stored as memory"})
            continue
        key = _key_of(sentence)
        if key is not None:
            found.append(Candidate(sentence.rstrip(" ."), key))
    return found, refused


class MemoryWriter:
    def __init__(self, store: RelationalStore, memory: MemoryStore, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.memory, self.clock = store, memory, clock

    def run(self, limit: int = 100) -> int:
        """Process up to ``limit`` pending jobs; how many were done."""
        done = 0
        for conversation_id, seq, user_id in self._claim(limit):
            try:
                self._learn(conversation_id, seq, user_id)
                done += 1
            except Exception as err:  # noqa: BLE001 - recorded on the job, retried later
                with self.store.session(write=True) as db:
                    db.run("UPDATE memory_jobs SET error = ?, claimed_until = NULL, status = "
                           "CASE WHEN attempts >= ? THEN 'failed' ELSE 'pending' END "
                           "WHERE conversation_id = ? AND seq = ?",
                           (f"{type(err).__name__}: {err}", MAX_ATTEMPTS, conversation_id,
                            seq))
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
        candidates, decisions = extract(item)
        current = self.memory.entries(user_id)
        for candidate in candidates:
            decisions.append(self._decide(user_id, candidate, item, current))
        with self.store.session(write=True) as db:
            _finish(db, conversation_id, seq, decisions)

    def _decide(self, user_id: str, candidate: Candidate, item: Item,
                current: list[Any]) -> dict[str, str]:
        same_text = next((e for e in current if e.text.casefold() == candidate.text.casefold()),
                         None)
        if same_text is not None:
            return {"text": candidate.text, "decision": "NOOP", "entry": same_text.id,
                    "reason": "already remembered"}
        memory = NewMemory(candidate.text, source=Source.USER_STATED,
                           conversation_id=item.conversation_id, item_seqs=(item.seq,))
        same_key = next((e for e in reversed(current)
                         if _key_of(e.text) == candidate.key), None)
        if same_key is not None:
            entry = self.memory.update(user_id, same_key.id, memory,
                                       reason=f"the user said so again: {candidate.key}")
            current.append(entry)
            return {"text": candidate.text, "decision": "UPDATE", "entry": entry.id,
                    "replaces": same_key.id, "reason": f"a new value for {candidate.key!r}"}
        entry = self.memory.add(user_id, memory)
        current.append(entry)
        return {"text": candidate.text, "decision": "ADD", "entry": entry.id,
                "reason": "a user-stated fact"}


def _key_of(text: str) -> str | None:
    """What a first-person statement is about ("live", "daughter", "prefer"), or None if
    ``text`` is not one."""
    for pattern in _STATEMENTS:
        match = pattern.search(text)
        if match:
            return " ".join((match.group(1) if match.groups() else match.group(0)
                             ).casefold().split())
    return None


def _finish(db: Session, conversation_id: str, seq: int, decisions: list[dict[str, str]]
            ) -> None:
    db.run("UPDATE memory_jobs SET status = 'done', claimed_until = NULL, error = NULL, "
           "decisions = ? WHERE conversation_id = ? AND seq = ?",
           (json.dumps(decisions, ensure_ascii=False), conversation_id, seq))
