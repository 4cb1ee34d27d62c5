"""Call: run the model on an assembled request, catching failure instead of losing it.

A failed or cancelled call is an outcome to record, not an exception to lose: the caller
commits it as a failed call, so the turn can be retried without re-sending the message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from threadline.calls import Timings
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
