"""Replay recorded model calls through today's code: does it still send the same bytes?

For each call, the request is assembled again from the log at the call's point
(``replay/rebuild.py``), rendered again as the call's backend renders it
(``replay/rerender.py``), and compared byte by byte with the request the call recorded as
sent (``replay/diff.py``): ``same``, or the first difference, named by segment, byte offset,
log item and field. A change that would silently move the cacheable prefix (a renderer, the
system prompt's placement, a tail block above the history, a tool definition) shows up as a
difference in the first call it touches.

With a model, each re-assembled request is also sent to it and its answer compared with the
recorded one; where that model is the recorded backend itself, the bytes compared are the ones
it sends today.

Not to be confused with ``eval/replay.py``, which replays datasets through assembly policies.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from threadline.calls import ModelCall
from threadline.errors import NotFound, UnknownCall, UnknownConversation
from threadline.models.base import Completion, ModelBackend
from threadline.plugin import Host
from threadline.replay.diff import Difference, first_difference
from threadline.replay.rebuild import Histories, Unreplayable, rebuild
from threadline.replay.rerender import rerenderer
from threadline.request import Request
from threadline.stores.base import Store

__all__ = ["Answer", "CallReplay", "Difference", "calls_to_replay", "replay", "replay_call"]


@dataclass(frozen=True)
class Answer:
    """The recorded answer against the one the model gives the re-assembled request now."""

    same: bool
    recorded: str
    replayed: str
    error: str | None = None  # the model call failed

    def to_json(self) -> dict[str, Any]:
        return {"same": self.same, "recorded": self.recorded, "replayed": self.replayed,
                "error": self.error}


@dataclass(frozen=True)
class CallReplay:
    call: ModelCall
    outcome: str                    # "same" | "differs" | "skipped"
    compared: str | None = None     # "bytes" | "messages" (the backend's renderer needs the
    #                                 model: only the messages were re-rendered) | None
    difference: Difference | None = None
    reason: str | None = None       # why it was skipped
    answer: Answer | None = None    # with a model

    @property
    def differs(self) -> bool:
        return self.outcome == "differs"

    def to_json(self) -> dict[str, Any]:
        c = self.call
        return {"call_id": c.id, "conversation_id": c.conversation_id, "branch": c.branch,
                "turn": c.turn, "purpose": c.purpose, "model": c.model,
                "status": str(c.status), "outcome": self.outcome, "compared": self.compared,
                "difference": None if self.difference is None else self.difference.to_json(),
                "reason": self.reason,
                "answer": None if self.answer is None else self.answer.to_json()}


def calls_to_replay(store: Store, target: str) -> list[ModelCall]:
    """The calls ``target`` names: one call by its id, or every call of a conversation, in
    the order they were made (with their requests)."""
    try:
        return [store.call(target)]
    except UnknownCall:
        pass
    try:
        listed = store.calls(target)
    except UnknownConversation:
        raise NotFound(f"no model call or conversation has the id {target!r}",
                       hint="list conversations with: threadline conversations list; a "
                            "conversation's calls with: threadline calls list CONVERSATION") \
            from None
    return [store.call(c.id) for c in listed]


def replay(host: Host, calls: list[ModelCall], *,
           model: ModelBackend | None = None) -> Iterator[CallReplay]:
    """Replay ``calls`` (as :func:`calls_to_replay` finds them) through ``host``'s assembly,
    and with ``model``, its answers too. One result per call, in order."""
    histories = Histories(host)
    for call in calls:
        yield replay_call(host, call, model=model, histories=histories)


def replay_call(host: Host, call: ModelCall, *, model: ModelBackend | None = None,
                histories: Histories | None = None) -> CallReplay:
    recorded = call.request
    if recorded is None:
        return CallReplay(call, "skipped", reason="the record holds no request")
    rerender = rerenderer(call)
    if rerender is None:
        return CallReplay(call, "skipped", reason=f"replay cannot render requests as "
                          f"{recorded.model} does (docs/replay.md)")
    try:
        request = rebuild(host, histories or Histories(host), call)
    except Unreplayable as err:
        return CallReplay(call, "skipped", reason=str(err))
    again = rerender(request, recorded)
    sent, compared = again.sent, again.compared
    answer = None
    if model is not None:
        completion, answer = _answer(model, request, call.response)
        if completion is not None and completion.sent.model == recorded.model:
            sent, compared = completion.sent, "bytes"  # the backend itself, as it sends today
    layout = (call.prefix or {}).get("layout", ())
    difference = first_difference(recorded, sent, request, layout)
    return CallReplay(call, "same" if difference is None else "differs", compared, difference,
                      answer=answer)


def _answer(model: ModelBackend, request: Request, response: Mapping[str, Any]
            ) -> tuple[Completion | None, Answer]:
    was = _said(response.get("text"), response.get("tool_calls"))
    try:
        completion = model.complete(request)
    except Exception as err:  # a model that fails is an answer that differs, not a crash
        return None, Answer(False, was, "", f"{type(err).__name__}: {err}")
    now = _said(completion.text, [c.to_json() for c in completion.tool_calls])
    return completion, Answer(was == now, was, now)


def _said(text: object, tool_calls: object) -> str:
    """An answer as text: what the model said, then the tools it asked for (by name and
    arguments: call ids are made up afresh on every call)."""
    out = text if isinstance(text, str) else ""
    for call in tool_calls if isinstance(tool_calls, list) else ():
        out += f"\n→ {call.get('name')}({call.get('arguments')})"
    return out
