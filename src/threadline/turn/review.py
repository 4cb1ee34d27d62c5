"""The review queue: conversations the trajectory monitor flagged, until someone resolves them.

A flag is the monitor's ``flag`` action (``turn/monitoring.py``): the first decision on a
branch whose risk reached the policy's flag threshold. Nothing is written for the queue
itself; it is read from the log. Resolving a flag appends a note that holds the resolution
(``review_resolved``), after the flag, on the flagged branch: the log stays append-only and
the flag stays where it was, with its resolution after it.

Listing is a scan of every conversation's branches (there is no index of flags): its cost
grows with the log, and it is meant for a person reviewing, or a scrape every few minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from threadline.errors import InputError
from threadline.items import Item, ItemKind, NewItem, format_time, utc_now
from threadline.stores.base import Store, append
from threadline.turn import monitoring

RESOLVED = "review_resolved"  # the note's field that holds a resolution
NOTE_LIMIT = 2000  # characters of a resolution's note


@dataclass(frozen=True)
class Flag:
    """One flagged branch: the decision that flagged it and the message it judged."""

    conversation_id: str
    branch: str
    seq: int                  # the decision's item
    flagged_at: datetime
    turn: int                 # the judged message's turn number, from 1
    message: str              # the user message the decision judged
    risk: float
    signals: tuple[Mapping[str, Any], ...]  # those that scored, strongest first
    resolution: Mapping[str, Any] | None = None  # the resolving note's, once resolved

    @property
    def resolved(self) -> bool:
        return self.resolution is not None

    def to_json(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "branch": self.branch,
                "seq": self.seq, "flagged_at": format_time(self.flagged_at),
                "turn": self.turn, "message": self.message, "risk": self.risk,
                "signals": [dict(s) for s in self.signals], "resolved": self.resolved,
                "resolution": None if self.resolution is None else dict(self.resolution)}


def flag_on(history: Sequence[Item], conversation_id: str) -> Flag | None:
    """The flag in a branch's history (on the branch it was raised on), with its
    resolution if one follows it."""
    turn, message, flag = 0, "", None
    for item in history:
        if item.kind is ItemKind.USER:
            turn, message = turn + 1, str(item.content.get("text", ""))
        elif flag is None:
            found = monitoring.decision(item)
            if found is not None and "flag" in found.get("actions", ()):
                signals = sorted((s for s in found.get("signals", ())
                                  if float(s.get("score", 0)) > 0),
                                 key=lambda s: -float(s.get("score", 0)))
                flag = Flag(conversation_id, item.branch, item.seq, item.created_at, turn,
                            message, float(found.get("risk", 0)), tuple(signals))
        elif item.kind is ItemKind.NOTE and isinstance(item.content.get(RESOLVED), Mapping):
            return replace(flag, resolution={**item.content[RESOLVED], "seq": item.seq,
                                             "resolved_at": format_time(item.created_at)})
    return flag


def flags(store: Store, conversation_id: str) -> list[Flag]:
    """The flags of one conversation, one per flagged branch. A fork sees its parent's flag
    in its history (and the monitor's state carries it, so no second one is raised): it is
    counted once, on the branch where it was raised."""
    found = []
    for branch in store.branches(conversation_id):
        flag = flag_on(store.history(conversation_id, branch.name), conversation_id)
        if flag is not None and flag.branch == branch.name:
            found.append(flag)
    return sorted(found, key=lambda f: f.seq)


def queue(store: Store, *, resolved: bool = False,
          limit: int | None = None) -> list[Flag]:
    """Flagged conversations, newest flag first: the open ones (and, with ``resolved``, the
    resolved ones too), at most ``limit``."""
    out = [flag for summary in store.conversations()
           for flag in flags(store, summary.conversation.id)
           if resolved or not flag.resolved]
    out.sort(key=lambda f: (f.flagged_at, f.conversation_id, f.seq), reverse=True)
    return out[:limit] if limit is not None else out


def resolve(store: Store, conversation_id: str, note: str = "", *, by: str | None = None,
            clock: Callable[[], datetime] = utc_now) -> Item:
    """Resolve the conversation's open flag: append a note holding the resolution (and
    ``note``, who resolved it in ``by``) on the flagged branch. An unknown conversation, one
    never flagged, or one already resolved is refused before anything is written."""
    store.conversation(conversation_id)  # UnknownConversation
    note = note.strip()
    if len(note) > NOTE_LIMIT:
        raise InputError(f"a resolution's note is at most {NOTE_LIMIT} characters; got "
                         f"{len(note)}")
    found = flags(store, conversation_id)
    open_ = [f for f in found if not f.resolved]
    if not open_:
        if found:
            raise InputError(f"conversation {conversation_id!r}'s flag is already resolved",
                             hint="see it with: threadline review list --all")
        raise InputError(f"conversation {conversation_id!r} was never flagged for review",
                         hint="list the flagged ones with: threadline review list")
    flag = open_[0]
    resolution: dict[str, Any] = {"flag_seq": flag.seq, "note": note}
    if by is not None:
        resolution["by"] = by
    text = "review resolved" + (f": {note}" if note else "")
    return append(store, conversation_id, flag.branch, clock(),
                  NewItem.note(text, **{RESOLVED: resolution}))[0]
