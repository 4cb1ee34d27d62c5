"""Standing constraints: instructions about how to behave for the rest of the conversation.

Summarisers drop them ("always British spelling" reads like boilerplate next to the facts of a
task), and recency truncation drops all of them, so they are found *before* any compaction and
kept apart: each one is a ``constraint`` item in the log, with the message it came from and who
set it, and every compaction pins the active ones verbatim in the pinned segment.

Detection here is rule-based and deterministic: a sentence of a user message is a standing
constraint when it carries a scope ("from now on", "for the rest of the conversation"), an
``always``/``never`` addressed to the assistant, a stated preference ("I prefer…"), a naming
rule ("call me…"), a style rule about replies ("respond in French", "use British spelling",
"keep answers short"), or a prohibition on an action ("don't touch…", "never write to prod").
Questions are never constraints. A model can propose more (``source="model"``); the user can
add, edit and remove them (``source="user"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from threadline.compaction.summarize import sentences
from threadline.errors import InputError
from threadline.items import Item, ItemKind, NewItem, utc_now, validate_text
from threadline.settings import DEFAULT_MAX_MESSAGE_BYTES
from threadline.stores.base import MAIN, Store, append

SOURCES = ("said", "user", "model")  # found in a message / added by the user / model-proposed

_LEAD = re.compile(r"^(?:(?:also|and|but|so|ok|okay|oh|btw|one more thing|plus|"
                   r"however|finally|lastly|please|remember|note)\b[\s,:;-]*)+", re.I)
_SCOPE = re.compile(
    r"\b(from now on|going forward|from here on|for the rest of (?:this|the|our) "
    r"(?:conversation|chat|session|discussion|project)|for all (?:future|subsequent|following) "
    r"|in (?:all|every) (?:future |subsequent |following )?(?:answers?|responses?|replies|"
    r"messages|outputs?)|every time you|whenever you|each time you|until I say otherwise|"
    r"unless I say otherwise|at all times|in this (?:conversation|chat|session))\b", re.I)
_ALWAYS = re.compile(r"^(?:you\s+(?:should|must|will|shall|need to|have to)\s+|you'll\s+|"
                     r"you\s+)?(?:must\s+)?(?:always|never)\b", re.I)
# "…, so never include nuts": a rule stated after a reason
_CLAUSE = re.compile(r"[,;:]\s*(?:so|and|but|therefore|then|which means)?\s*(?:please\s+)?"
                     r"(?:always|never)\s+(?!mind\b|again\b|ever\b|before\b|been\b|was\b|"
                     r"were\b|had\b|have\b|did\b|do\b|got\b|seen\b|heard\b)[a-z]+", re.I)
_MUST = re.compile(r"^(?:you\s+)?(?:must not|must never|should never|shall not|may not|"
                   r"are not allowed to|aren't allowed to|are never to|must)\b", re.I)
_PREFER = re.compile(r"^(?:I|we)\s+(?:(?:would|'d)\s+)?(?:prefer|rather|like my|want my|"
                     r"want all|want every|want you to always|want you to never)\b", re.I)
_NAMING = re.compile(r"^(?:call me|address me as|refer to me as|my name is|my pronouns are)\b",
                     re.I)
_STYLE = re.compile(
    r"^(?:respond|reply|answer|speak|talk)\b|"
    r"^write (?:only |everything |all |your \w+ )?(?:in|using) \b|"
    r"^use (?:only )?(?:British|American|UK|US|metric|imperial|SI|\w+ spelling|\w+ units|"
    r"the metric|the imperial|bullet points|markdown|plain text|tabs|spaces|type hints|"
    r"formal|informal|a formal|an informal|\w+ case)\b|"
    r"^keep (?:your |all |the |every )?(?:answers?|responses?|replies|explanations?|"
    r"messages|it|things|them) (?:short|brief|concise|under|below|simple|to)\b|"
    r"^(?:be|stay) (?:concise|brief|formal|polite|terse|direct)\b|"
    r"^(?:avoid|no more|stop using|stop adding|don't use|do not use) \w+|"
    r"^(?:use|only use) \w+(?: \w+)? only\b|^only use\b", re.I)
_FORBID = re.compile(
    r"^(?:do not|don't|dont|never)\s+(?:ever\s+)?(?:touch|modify|delete|remove|push|deploy|"
    r"call|run|use|write to|write into|commit|change|edit|share|mention|include|reveal|"
    r"suggest|recommend|contact|email|book|spend|exceed|go over|assume|give|provide|offer|"
    r"add|send|say|quote|cite|translate|summarise|summarize|guess)\b", re.I)
_PERSONAL = re.compile(r"^(?:I|we|he|she|they|it|this|that|there)\b", re.I)


def detect(text: str) -> list[str]:
    """The sentences of ``text`` that set a standing constraint, verbatim, in order."""
    found = []
    for sentence in sentences(text):
        if sentence.endswith("?") or len(sentence) > 400:
            continue
        if _is_constraint(sentence):
            found.append(sentence)
    return found


def _is_constraint(sentence: str) -> bool:
    body = _LEAD.sub("", sentence).strip(" ,;:-")
    if _SCOPE.search(sentence):
        return True
    if _PREFER.match(body) or _NAMING.match(body) or _CLAUSE.search(body):
        return True
    if _PERSONAL.match(body):
        return False  # "I always forget my keys" describes; it does not instruct
    return bool(_ALWAYS.match(body) or _MUST.match(body) or _STYLE.match(body)
                or _FORBID.match(body))


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


def undetected(history: Sequence[Item]) -> list[NewItem]:
    """Constraint items for what the user's messages set that the log does not record yet.
    Anything recorded before, even if since removed or edited, is not proposed again: the
    user's removal stands."""
    seen = {(item.content.get("from_seq"), item.content["text"]) for item in history
            if item.kind is ItemKind.CONSTRAINT}
    out = []
    for item in history:
        if item.kind is not ItemKind.USER:
            continue
        for sentence in detect(item.content["text"]):
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
