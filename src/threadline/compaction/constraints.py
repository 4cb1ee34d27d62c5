"""Standing constraints: instructions about how to behave for the rest of the conversation.

Summarisers drop them ("always British spelling" reads like boilerplate next to the facts of a
task), and recency truncation drops all of them, so they are found *before* any compaction and
kept apart: each one is a ``constraint`` item in the log, with the message it came from and who
set it, and every compaction pins the active ones verbatim in the pinned segment.

Detection here is rule-based and deterministic (``constraint_rules``): explicit scopes, rules
for every reply, personas to keep, preferences, prohibitions, and the directives of a message
that sets any of those up; measured on hand-annotated real conversations with
``threadline eval constraints`` (docs/compaction.md). With the dense extra, a classifier over
sentence embeddings (``constraint_classifier``) decides with the rules' verdicts as input and
finds more of them; ``undetected`` takes whichever detector it is given.
Questions are never constraints. A model can propose more (``source="model"``); the user can
add, edit and remove them (``source="user"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from threadline.compaction.constraint_rules import standing
from threadline.errors import InputError
from threadline.items import Item, ItemKind, NewItem, utc_now, validate_text
from threadline.settings import DEFAULT_MAX_MESSAGE_BYTES
from threadline.stores.base import MAIN, Store, append

SOURCES = ("said", "user", "model")  # found in a message / added by the user / model-proposed


# a message's text → the sentences of it that set a standing constraint, verbatim, in order
Detector = Callable[[str], Sequence[str]]


def detect(text: str) -> list[str]:
    """The sentences of ``text`` that set a standing constraint, verbatim, in order
    (``constraint_rules`` says which). The embedding classifier
    (``constraint_classifier.ClassifiedDetector``) is a drop-in replacement that finds more."""
    return standing(text)


@dataclass(frozen=True)
class Constraint:
    """An active standing constraint."""

    seq: int               # the constraint item
    text: str
    source: str            # said | user | model
    from_seq: int | None   # the message it was found in, if any

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "text": self.text, "source": self.source,
                "from_seq": self.from_seq}


def new_constraint(text: str, *, source: str, from_seq: int | None = None,
                   replaces: int | None = None) -> NewItem:
    if source not in SOURCES:
        raise ValueError(f"unknown constraint source {source!r}")
    content: dict[str, Any] = {"text": text, "source": source, "from_seq": from_seq}
    if replaces is not None:
        content["replaces"] = replaces
    return NewItem(ItemKind.CONSTRAINT, content)


def removal(constraint_seq: int) -> NewItem:
    return NewItem(ItemKind.CONSTRAINT_REMOVED, {"constraint_seq": constraint_seq})


def active(history: Iterable[Item]) -> list[Constraint]:
    """The constraints in force at the end of ``history``, oldest first: every constraint item
    not removed (or replaced by an edit) later."""
    live: dict[int, Constraint] = {}
    for item in history:
        if item.kind is ItemKind.CONSTRAINT:
            replaced = item.content.get("replaces")
            if isinstance(replaced, int):
                live.pop(replaced, None)
            live[item.seq] = Constraint(item.seq, item.content["text"], item.content["source"],
                                        item.content.get("from_seq"))
        elif item.kind is ItemKind.CONSTRAINT_REMOVED:
            live.pop(item.content["constraint_seq"], None)
    return list(live.values())


def undetected(history: Sequence[Item], detector: Detector = detect) -> list[NewItem]:
    """Constraint items for what the user's messages set that the log does not record yet
    (as ``detector`` finds it). Anything recorded before, even if since removed or edited, is
    not proposed again: the user's removal stands."""
    seen = {(item.content.get("from_seq"), item.content["text"]) for item in history
            if item.kind is ItemKind.CONSTRAINT}
    out = []
    for item in history:
        if item.kind is not ItemKind.USER:
            continue
        for sentence in detector(item.content["text"]):
            if (item.seq, sentence) not in seen:
                seen.add((item.seq, sentence))
                out.append(new_constraint(sentence, source="said", from_seq=item.seq))
    return out


def add_constraint(store: Store, conversation_id: str, text: str, branch: str = MAIN, *,
                   replaces: int | None = None, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                   clock: Callable[[], datetime] = utc_now) -> Item:
    """Set a standing instruction (or, with ``replaces``, edit one). It applies from the next
    turn, in the tail until the next compaction pins it."""
    text = validate_text(text, max_bytes=max_bytes).strip()
    if replaces is not None:
        _active(store, conversation_id, branch, replaces)
    return append(store, conversation_id, branch, clock(),
                  new_constraint(text, source="user", replaces=replaces))[0]


def remove_constraint(store: Store, conversation_id: str, seq: int, branch: str = MAIN, *,
                      clock: Callable[[], datetime] = utc_now) -> Item:
    """Withdraw a constraint: it stops applying from the next turn; the log keeps it."""
    _active(store, conversation_id, branch, seq)
    return append(store, conversation_id, branch, clock(), removal(seq))[0]


def _active(store: Store, conversation_id: str, branch: str, seq: int) -> Constraint:
    for constraint in active(store.history(conversation_id, branch)):
        if constraint.seq == seq:
            return constraint
    raise InputError(f"item {seq} is not an active constraint on branch {branch!r} of "
                     f"{conversation_id}",
                     hint=f"list them with: threadline constraints list {conversation_id}")
