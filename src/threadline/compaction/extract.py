"""Model-assisted constraint extraction, checked so the model can only point, never invent.

The rules in ``constraints.py`` miss phrasings they were not written for; a model reads the
user's messages and lists the instructions it finds. Only lines the user actually wrote count:
each proposal must appear verbatim in one of the user's messages (that message becomes its
provenance); anything else is rejected and counted. The call is recorded like every model
call, as a side call (``purpose="compaction"``). A model error, a deadline passed, or output
that is not a list raises :class:`ExtractionFailed`, and the compaction that asked for it does
not happen: the uncompacted view stays, the failure is noted in the log, the conversation
goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from threadline.compaction.constraints import new_constraint
from threadline.errors import ModelError
from threadline.items import Item, ItemKind, NewItem
from threadline.models.base import ModelBackend
from threadline.models.calling import call_model, call_record
from threadline.request import Message, Request, Segment, SegmentKind, Stability
from threadline.stores.base import Commit, Store

PROMPT = ("List every instruction in the user's messages below that tells the assistant how to "
          "behave for the rest of the conversation (rules, preferences, prohibitions, style). "
          "Copy each one exactly as the user wrote it, one per line, each line starting with "
          "'- '. If there are none, answer NONE.")
USER_MESSAGES_LIMIT = 60  # the newest user messages shown to the extractor


class ExtractionFailed(ModelError):
    """The model could not say which constraints there are; nothing was compacted."""


@dataclass(frozen=True)
class Extraction:
    proposals: tuple[NewItem, ...]   # verbatim, new, ready to record
    rejected: tuple[str, ...]        # lines that were not the user's own words
    call_id: str


def extraction_request(messages: Sequence[Item]) -> Request:
    listing = "\n\n".join(f"[message {item.seq}]\n{item.content['text']}" for item in messages)
    return Request(tools=(), segments=(
        Segment(SegmentKind.SYSTEM, Stability.DEPLOY, (Message("system", PROMPT),),
                cache_point=True),
        Segment(SegmentKind.CURRENT, Stability.TURN, (Message("user", listing),))))


def extract(store: Store, model: ModelBackend, history: Sequence[Item], branch: str, *,
            clock: Callable[[], datetime], deadline_s: float = 30.0) -> Extraction:
    """Ask ``model`` for the constraints in the branch's user messages; record the call."""
    users = [i for i in history if i.kind is ItemKind.USER][-USER_MESSAGES_LIMIT:]
    request = extraction_request(users)
    started = time.monotonic()

    def watch(_: str) -> None:
        if time.monotonic() - started > deadline_s:
            raise TimeoutError(f"constraint extraction passed its {deadline_s:g} s deadline")

    outcome = call_model(model, request, clock=clock, on_text=watch)
    head = history[-1]
    error = None
    text = outcome.completion.text if outcome.completion is not None else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    listed = [line[1:].strip() for line in lines if line.startswith(("-", "*", "•"))]
    if outcome.completion is not None and not listed and lines != ["NONE"]:
        error = "malformed output: neither a list nor NONE"
    record = call_record(head=head, branch=branch, request=request, outcome=outcome,
                         model_id=model.model_id, error=error)
    call = store.commit(Commit(conversation_id=head.conversation_id, created_at=clock(),
                               branch=branch, check_head=False,
                               call=replace(record, purpose="compaction"))).call
    assert call is not None
    if outcome.error is not None:
        raise ExtractionFailed(f"constraint extraction failed: {outcome.error}")
    if error is not None:
        raise ExtractionFailed(f"constraint extraction failed: {error}")
    seen = {(i.content.get("from_seq"), i.content["text"]) for i in history
            if i.kind is ItemKind.CONSTRAINT}
    proposals, rejected = [], []
    for line in listed:
        quote = line.strip(" \"'“”")
        source = next((u for u in reversed(users) if quote and quote in u.content["text"]),
                      None)
        if source is None:
            rejected.append(line)
        elif (source.seq, quote) not in seen:
            seen.add((source.seq, quote))
            proposals.append(new_constraint(quote, source="model", from_seq=source.seq))
    return Extraction(tuple(proposals), tuple(rejected), call.id)
