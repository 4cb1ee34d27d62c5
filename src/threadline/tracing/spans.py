"""The engine's tracer (``turn/trace.py``) over an OpenTelemetry tracer: live SDK spans,
described as ``describe.py`` says, through the application's own provider and its span
processors.

Spans of threadline's own work with nothing under them (ingest, commit, the model call) are
made in one go as the step ends (one call into the SDK each), a model call's with the call's
own start and end. Providers, tools and turns run code that may be traced itself (an HTTP
client, a database driver, a delegated turn): their spans are started as they are entered and
current while they run. (``recorder.py`` makes the same spans for a fraction of the cost on
the turn's thread, for a provider threadline sets up itself.)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextvars import ContextVar, Token
from types import TracebackType

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

from threadline.tracing.describe import OPEN, STEPS, Ended, StepSpan, Where
from threadline.turn.trace import Fact, Step


class _Turn:
    """The current turn's: where it is, and its span (is it sampled?)."""

    __slots__ = ("where", "span")

    def __init__(self, span: trace.Span, where: Where) -> None:
        self.where = where
        self.span = span


_TURN: ContextVar[_Turn | None] = ContextVar("threadline_live_turn", default=None)


def finish(span: trace.Span, ended: Ended) -> None:
    """Set what the step's span ended with on ``span``, before it ends."""
    if ended.attributes:
        span.set_attributes(ended.attributes)
    if ended.error is not None:
        span.set_status(Status(StatusCode.ERROR, ended.error))
    if ended.exception is not None:
        span.record_exception(ended.exception)


class LiveSpan:
    """A step's span: started when entered and current until left if the step is open,
    else made in one go when it ends."""

    def __init__(self, tracer: OTelTracer, step: Step, name: str, facts: Sequence[Fact]
                 ) -> None:
        self.tracer, self.step = tracer, step
        turn = _TURN.get()
        # outside a turn (a step run on its own), a Where of the step's own
        where = turn.where if turn is not None and step is not Step.TURN else Where()
        self.described: StepSpan = STEPS[step](name, facts, where, tracer.capture_content)
        self.span: trace.Span | None = None
        self._tokens: tuple[Token[Context], Token[_Turn | None] | None] | None = None

    def record(self, *facts: Fact) -> None:
        now = time.time_ns()
        for fact in facts:
            self.described.fact(fact, now)

    def __enter__(self) -> LiveSpan:
        self._entered = time.time_ns()
        if self.step in OPEN:
            described = self.described
            self.span = self.tracer.otel.start_span(described.name, kind=described.kind,
                                                    attributes=described.attributes)
            turn_token = None
            if self.step is Step.TURN:
                turn_token = _TURN.set(_Turn(self.span, described.where))
            self._tokens = (context.attach(trace.set_span_in_context(self.span)), turn_token)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        ended = self.described.ended(self._entered, time.time_ns(), error)
        if self.span is None:  # a leaf: made now, from when it was entered
            span = self.tracer.otel.start_span(ended.name, kind=ended.kind,
                                               attributes=ended.attributes,
                                               start_time=ended.start_ns)
            finish(span, ended)
            span.end(end_time=ended.end_ns)
            return
        try:
            finish(self.span, ended)
            self.span.end()
        finally:
            assert self._tokens is not None
            otel_token, turn_token = self._tokens
            if turn_token is not None:
                _TURN.reset(turn_token)
            context.detach(otel_token)


class Skipped:
    """The steps of a turn the sampler left out: nothing to make, nothing to record."""

    def record(self, *facts: Fact) -> None:
        pass

    def __enter__(self) -> Skipped:
        return self

    def __exit__(self, *_: object) -> None:
        return None


SKIPPED = Skipped()


class OTelTracer:
    """Threadline's spans, made by ``otel`` (an OpenTelemetry tracer); messages and tool
    arguments and results are recorded only with ``capture_content``. The sampler decides
    at each turn's span: a turn left out costs its steps nothing (as the SDK's parent-based
    samplers, the default, would leave their spans out too)."""

    def __init__(self, otel: trace.Tracer, *, capture_content: bool = False) -> None:
        self.otel = otel
        self.capture_content = capture_content

    def span(self, step: Step, name: str = "", *facts: Fact) -> LiveSpan | Skipped:
        if step is not Step.TURN:
            turn = _TURN.get()
            if turn is not None and not turn.span.is_recording():
                return SKIPPED
        return LiveSpan(self, step, name, facts)
