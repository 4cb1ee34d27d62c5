"""One model call, run and recorded: what the turn, compaction and memory extraction share.

A failed or cancelled call is an outcome to record, not an exception to lose: the caller
commits it as a failed call, so the turn can be retried without re-sending the message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from threadline.calls import CallStatus, ModelCall, SentRequest, Timings, Usage
from threadline.items import Item, new_id
from threadline.models.base import Completion, ModelBackend, OnText, Stopwatch
from threadline.request import Request


@dataclass(frozen=True)
class CallOutcome:
    started_at: datetime
    timings: Timings
    completion: Completion | None = None
    error: BaseException | None = None  # set exactly when completion is None


def call_model(model: ModelBackend, request: Request, *, clock: Callable[[], datetime],
               on_text: OnText | None = None) -> CallOutcome:
    started_at = clock()
    watch = Stopwatch()
    try:
        completion = model.complete(request, on_text=on_text)
    except (Exception, KeyboardInterrupt) as err:  # Ctrl-C cancels the turn: recorded too
        return CallOutcome(started_at, watch.timings(), error=err)
    return CallOutcome(started_at, completion.timings, completion=completion)


def sent_request(request: Request, outcome: CallOutcome, model_id: str) -> SentRequest:
    """What the call sent: the completion's record, or the one a failed call's error carries
    (a backend that built its payload before it failed); for a call that failed before that,
    what it meant to send (the request's messages in the OpenAI shape)."""
    if outcome.completion is not None:
        return outcome.completion.sent
    carried = getattr(outcome.error, "sent_request", None)
    if isinstance(carried, SentRequest):
        return carried
    return SentRequest(model=model_id, messages=request.openai_tuple(),
                       history=request.history)


def call_record(*, head: Item, branch: str, request: Request, outcome: CallOutcome,
                model_id: str, error: str | None = None,
                prefix: Mapping[str, Any] | None = None) -> ModelCall:
    """The record of one call, with its prefix report (``cache.attribution.report``)."""
    completion = outcome.completion
    if outcome.error is not None:
        error = f"{type(outcome.error).__name__}: {outcome.error}"
    ok = completion is not None and error is None
    return ModelCall(
        id=new_id("call_"),
        conversation_id=head.conversation_id,
        branch=branch,
        turn=head.turn,
        head_seq=head.seq,
        reply_seq=None,
        status=CallStatus.OK if ok else CallStatus.FAILED,
        model=completion.sent.model if completion else model_id,
        request=sent_request(request, outcome, model_id),
        response=completion.response_json() if completion else {},
        usage=completion.usage if completion else Usage(),
        timings=outcome.timings,
        started_at=outcome.started_at,
        error=error,
        prefix=prefix,
    )
