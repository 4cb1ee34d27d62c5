"""The tracer: the seam for spans around the steps of a turn.

Hooks (``turn/hooks.py``) see a turn once it is committed and the observer
(``turn/observe.py``) hears of what happens beside it; neither sees how long each step took,
nor which step a failure came from. A tracer does: the engine opens a span for each step,

    turn                            run_turn() or answer(), from its call to its return
      ingest                        the user's message made durable (or found, for a retry)
      provider NAME                 each context provider's gather
      model_call MODEL_ID           each call to the model
      tool_call TOOL                each tool call the model asked for (in the tool's thread)
      commit KIND                   each commit of a call's outcome: reply, tool_calls,
                                    failed_call, or served (a provider's answer)

as a context manager: entering starts the span, leaving ends it, with the exception that
left the step, if one did. What the engine already holds is handed over as it is (the
turn's input, the message, the request, the call's outcome and prefix report, the call
record...), as ``facts`` when the span starts and through ``record`` while it runs; the
tracer picks what it exports and how it names it (``threadline.tracing`` speaks
OpenTelemetry's GenAI conventions). The spans nest as the steps do: a tracer keeps the
current span in a context variable, and the engine runs tool calls in a copy of its context.

Like an observer, a tracer never fails a turn: ``guarded`` logs what it raises and carries
on, and the quiet tracer of an engine that was given none costs a method call per step. A
tracer that says it ``guards_itself`` (it catches and logs every failure inside, as
``threadline.tracing``'s recorder does, and a test shows it) is used as it is.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from enum import StrEnum
from types import TracebackType
from typing import Protocol

from threadline.cache.prefix import PrefixReport
from threadline.calls import ModelCall
from threadline.items import Item, NewItem
from threadline.models.calling import CallOutcome
from threadline.request import Request
from threadline.turn.input import TurnInput
from threadline.turn.result import TurnResult

log = logging.getLogger("threadline.trace")

# what a step hands its span: the values the engine works with, as they are
Fact = TurnInput | TurnResult | Item | NewItem | Request | CallOutcome | PrefixReport | ModelCall


class Step(StrEnum):
    TURN = "turn"              # facts: the TurnInput; records: the TurnResult
    INGEST = "ingest"          # records: the user message (an Item)
    PROVIDER = "provider"      # name: the provider's; records: what it found (a NewItem)
    MODEL_CALL = "model_call"  # name: the model id; facts: the Request and the branch's
    #                            head (an Item); records: the CallOutcome, the PrefixReport
    TOOL_CALL = "tool_call"    # name: the tool's; facts: the call (an Item); records: the
    #                            result (a NewItem)
    COMMIT = "commit"          # name: reply, tool_calls, failed_call or served; records: the
    #                            call record (a ModelCall) or the reply (an Item)


class Span(Protocol):
    def record(self, *facts: Fact) -> None:
        """What the step learned while it ran (before the span ends)."""
        ...


class Tracer(Protocol):
    def span(self, step: Step, name: str = "", *facts: Fact
             ) -> AbstractContextManager[Span]:
        """A span for ``step``: started when entered, ended when left."""
        ...


class _QuietSpan:
    """The span of a quiet tracer, and its own context manager: one object for every step."""

    def record(self, *facts: Fact) -> None:
        pass

    def __enter__(self) -> _QuietSpan:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        return None


_QUIET_SPAN = _QuietSpan()


class Quiet:
    """The tracer of an engine that was given none."""

    def span(self, step: Step, name: str = "", *facts: Fact) -> AbstractContextManager[Span]:
        return _QUIET_SPAN


QUIET = Quiet()


class _GuardedSpan:
    """A span whose failures (starting, recording, ending) are logged, never raised; the
    step's own exception always goes on as it was."""

    def __init__(self, opening: AbstractContextManager[Span], step: Step) -> None:
        self._opening: AbstractContextManager[Span] | None = opening
        self._step = step
        self._span: Span = _QUIET_SPAN

    def __enter__(self) -> _GuardedSpan:
        assert self._opening is not None
        try:
            self._span = self._opening.__enter__()
        except Exception:  # noqa: BLE001 - tracing never fails a turn
            log.exception("tracer failed to start a %s span", self._step)
            self._opening = None
        return self

    def record(self, *facts: Fact) -> None:
        try:
            self._span.record(*facts)
        except Exception:  # noqa: BLE001
            log.exception("tracer failed to record on a %s span", self._step)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._opening is None:
            return None
        try:
            self._opening.__exit__(kind, error, traceback)
        except Exception:  # noqa: BLE001
            log.exception("tracer failed to end a %s span", self._step)
        return None  # never swallows the step's exception, whatever the tracer said


class Guarded:
    """A tracer whose failures are logged, never raised into the turn."""

    def __init__(self, inner: Tracer) -> None:
        self.inner = inner

    def span(self, step: Step, name: str = "", *facts: Fact) -> AbstractContextManager[Span]:
        try:
            opening = self.inner.span(step, name, *facts)
        except Exception:  # noqa: BLE001 - tracing never fails a turn
            log.exception("tracer failed to open a %s span", step)
            return _QUIET_SPAN
        return _GuardedSpan(opening, step)


def guarded(tracer: Tracer | None) -> Tracer:
    """What the engine calls: ``tracer`` guarded, or the quiet one."""
    if tracer is None:
        return QUIET
    return tracer if getattr(tracer, "guards_itself", False) else Guarded(tracer)
