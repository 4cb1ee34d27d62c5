"""The engine's tracer, recording: each step's span is kept as the engine's own values while
the turn runs, and described and handed to a ``Sink`` (``sink.py``) after the turn, in
batches, by a thread of its own (``batch.py``).

The live tracer (``spans.py``) pays for the OpenTelemetry SDK's span objects on the turn's
thread: validating every attribute, locks, the processors' hooks, 250-300 µs a turn of six
spans against a scripted turn of under a millisecond (BENCHMARKS.md). Here a step costs a
small object and two clock reads; a turn makes one span current for OpenTelemetry, which is
always the innermost step other code runs under (``_Innermost``), so that code's own spans
(an HTTP client, a delegated turn) still nest under the step they ran in: the span's ids
are made here, by the provider's id generator, and the sampler decides at each turn, as the
SDK would. What the spans say comes from ``describe.py``, as for the live tracer, and the
sink receives the SDK's own spans (``sink.sdk_spans``). ``relay.py`` is the sink
``Tracing.from_config`` uses: the turns go to a process of their own, which builds and
exports the spans.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from types import TracebackType

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import DEFAULT_ON, Sampler
from opentelemetry.trace import (
    INVALID_SPAN_CONTEXT,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    TraceFlags,
    TraceState,
)
from opentelemetry.util.types import AttributeValue

from threadline.tracing.batch import Batches
from threadline.tracing.describe import OPEN, STEPS, Ended, StepSpan, Where
from threadline.tracing.sink import RecordedTurn, Sink
from threadline.tracing.spans import SKIPPED, Skipped
from threadline.turn.trace import Fact, Step

log = logging.getLogger("threadline.trace")


class _Turn:
    """A sampled turn's trace as it is recorded: its ids, and its steps in the order they
    started (the turn's own span first). A step refers to its turn only while it is open, so
    an ended turn holds no reference cycle: reference counting frees it once it is described,
    where a cycle would wait for the collector's full pass (tens of thousands of objects a
    pass at a few hundred turns a second, and a pause of 100 ms or more in whichever turn
    sets it off)."""

    __slots__ = ("trace_id", "flags", "state", "steps", "ids")

    def __init__(self, trace_id: int, flags: TraceFlags, state: TraceState,
                 ids: IdGenerator) -> None:
        self.trace_id, self.flags, self.state, self.ids = trace_id, flags, state, ids
        self.steps: list[_Step] = []

    def span_context(self, span_id: int) -> SpanContext:
        return SpanContext(self.trace_id, span_id, False, self.flags, self.state)


class _Innermost(NonRecordingSpan):
    """The span OpenTelemetry sees as current while a recorded turn runs: whichever of the
    turn's open steps (the turn, a provider, a tool call) is innermost where it is asked.
    So a turn attaches one context, and a step only moves ``_CURRENT``."""

    def __init__(self, turn: _Turn, root_id: int) -> None:
        super().__init__(INVALID_SPAN_CONTEXT)
        self._turn, self._root_id = turn, root_id

    def get_span_context(self) -> SpanContext:
        current = _CURRENT.get()
        if current is not None and current[0] is self._turn:
            return self._turn.span_context(current[1])
        return self._turn.span_context(self._root_id)


_ROOT_NAMES = {step: f"threadline.{step.value}" for step in Step}  # as the sampler sees them
_NO_STATE = TraceState()
_KINDS = {kind: kind.value for kind in SpanKind}
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
_NOTHING: tuple[None, int] = (None, 0)  # the current turn, while it is left out

# the current turn, and the span id its next step hangs under (the innermost open step)
# (None: a turn the sampler left out, whose steps are left out too)
_CURRENT: ContextVar[tuple[_Turn | None, int] | None] = ContextVar("threadline_recorded",
                                                                   default=None)


class _Step:
    """A step's span while the turn runs: what the engine handed over, as it was; ``turn``
    is None once the step has ended (see ``_Turn``)."""

    __slots__ = ("turn", "step", "name", "facts", "recorded", "span_id", "parent_id",
                 "entered", "left", "raised", "_token")

    def __init__(self, turn: _Turn, step: Step, name: str, facts: Sequence[Fact],
                 parent_id: int) -> None:
        self.turn: _Turn | None = turn
        self.step, self.name, self.facts = step, name, facts
        self.recorded: list[tuple[Sequence[Fact], int]] = []
        self.span_id = turn.ids.generate_span_id()
        self.parent_id = parent_id
        self.raised: BaseException | None = None
        self._token: Token[tuple[_Turn | None, int] | None] | None = None
        turn.steps.append(self)

    def record(self, *facts: Fact) -> None:
        try:
            self.recorded.append((facts, time.time_ns()))
        except Exception:  # noqa: BLE001 - tracing never fails a turn
            log.exception("tracer failed to record on a %s span", self.step)

    def __enter__(self) -> _Step:
        try:
            self.entered = time.time_ns()
            if self.step in OPEN and self.turn is not None:
                self._token = _CURRENT.set((self.turn, self.span_id))
        except Exception:  # noqa: BLE001
            log.exception("tracer failed to start a %s span", self.step)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        try:
            self.left = time.time_ns()
            self.raised = error
            self.turn = None
            if self._token is not None:  # it holds the value before: this turn, if nested
                _CURRENT.reset(self._token)
                self._token = None
        except Exception:  # noqa: BLE001
            log.exception("tracer failed to end a %s span", self.step)


class _Root(_Step):
    """A turn's span (or a step's outside any turn): its trace is queued for the sink as it
    ends."""

    __slots__ = ("recorder", "parent_remote", "sampled", "_otel")

    def __init__(self, recorder: Recorder, turn: _Turn, step: Step, name: str,
                 facts: Sequence[Fact], parent: SpanContext | None,
                 sampled: Mapping[str, AttributeValue] | None) -> None:
        super().__init__(turn, step, name, facts, 0 if parent is None else parent.span_id)
        self.recorder = recorder
        self.parent_remote = parent is not None and parent.is_remote
        self.sampled = sampled  # what the sampler added to the span, as the SDK adds it
        self._otel: Token[Context] | None = None

    def __enter__(self) -> _Root:
        turn = self.turn
        super().__enter__()
        if self.step in OPEN and turn is not None:
            try:
                self._otel = context.attach(trace.set_span_in_context(
                    _Innermost(turn, self.span_id)))
            except Exception:  # noqa: BLE001 - tracing never fails a turn
                log.exception("tracer failed to make a %s span current", self.step)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        turn = self.turn
        if self._otel is not None:
            try:
                context.detach(self._otel)
                self._otel = None
            except Exception:  # noqa: BLE001
                log.exception("tracer failed to end a %s span", self.step)
        super().__exit__(kind, error, traceback)
        if hasattr(self, "left") and turn is not None:
            self.recorder.batches.add(turn)


class _LeftOut:
    """A turn the sampler left out: while it runs, its steps are left out too, and code that
    traces itself sees a parent that is not sampled (as the SDK's parent-based samplers,
    the default, would have it)."""

    __slots__ = ("context", "_tokens")

    def __init__(self, trace_id: int, span_id: int, state: TraceState) -> None:
        self.context = trace.set_span_in_context(NonRecordingSpan(SpanContext(
            trace_id, span_id, False, _NOT_SAMPLED, state)))

    def record(self, *facts: Fact) -> None:
        pass

    def __enter__(self) -> _LeftOut:
        self._tokens = (context.attach(self.context), _CURRENT.set(_NOTHING))
        return self

    def __exit__(self, *_: object) -> None:
        otel_token, token = self._tokens
        _CURRENT.reset(token)
        context.detach(otel_token)


class Recorder:
    """Threadline's spans, recorded (see the module's docstring) and handed to ``sink``;
    ``sampler`` and ``ids`` as the SDK's provider has them (by default, every turn, random
    ids). Messages and tool arguments and results are recorded only with
    ``capture_content``. A turn the sampler leaves out costs its steps nothing. It catches
    and logs every failure itself (the sampler's, the id generator's, the sink's), so the
    engine calls it without a guard around each step."""

    guards_itself = True

    def __init__(self, sink: Sink, *, sampler: Sampler = DEFAULT_ON,
                 ids: IdGenerator | None = None, capture_content: bool = False) -> None:
        self.sampler = sampler
        self.ids = ids if ids is not None else RandomIdGenerator()
        self.capture_content = capture_content
        self.batches: Batches[_Turn] = Batches(self.described, sink)

    def flush(self, timeout_ms: int) -> bool:
        """Every turn ended so far exported; False if that did not finish in time."""
        return self.batches.flush(timeout_ms)

    def shutdown(self) -> None:
        """Export what waits and stop; later turns' spans are dropped."""
        self.batches.shutdown()

    def span(self, step: Step, name: str = "", *facts: Fact) -> _Step | _LeftOut | Skipped:
        try:
            current = _CURRENT.get()
            if current is not None and step is not Step.TURN:
                turn, parent_id = current
                return SKIPPED if turn is None else _Step(turn, step, name, facts, parent_id)
            return self._root(step, name, facts)
        except Exception:  # noqa: BLE001 - tracing never fails a turn
            log.exception("tracer failed to open a %s span", step)
            return SKIPPED

    def _root(self, step: Step, name: str, facts: Sequence[Fact]) -> _Root | _LeftOut:
        """A new trace's first span, or a child of the span current where the turn runs (a
        caller's, from its request; a delegating tool call's), if the sampler keeps it."""
        where = context.get_current()
        found = trace.get_current_span(where).get_span_context()
        parent = found if found.is_valid else None
        trace_id = parent.trace_id if parent is not None else self.ids.generate_trace_id()
        decided = self.sampler.should_sample(where, trace_id, _ROOT_NAMES[step])
        state = decided.trace_state if decided.trace_state is not None else (
            parent.trace_state if parent is not None else _NO_STATE)
        if not decided.decision.is_sampled():  # type: ignore[no-untyped-call]
            return _LeftOut(trace_id, self.ids.generate_span_id(), state)
        turn = _Turn(trace_id, _SAMPLED, state, self.ids)
        return _Root(self, turn, step, name, facts, parent, decided.attributes)

    def described(self, turn: _Turn) -> RecordedTurn:
        """The ended turn's spans as plain data, described as the live tracer would."""
        root, where = turn.steps[0], Where()
        assert isinstance(root, _Root)
        steps: list[tuple[_Step, StepSpan]] = []
        for step in turn.steps:  # every fact first: where the turn is, for every span
            described = STEPS[step.step](step.name, step.facts, where, self.capture_content)
            for facts, at in step.recorded:
                for fact in facts:
                    described.fact(fact, at)
            steps.append((step, described))
        spans = []
        for step, described in steps:
            if not hasattr(step, "left"):  # a step opened and never entered, or never left
                continue
            ended = described.ended(step.entered, step.left, step.raised)
            attributes = ended.attributes
            if step is root and root.sampled:
                attributes = {**root.sampled, **attributes}
            spans.append((ended.name, _KINDS[ended.kind], step.span_id, step.parent_id,
                          root.parent_remote if step is root else False,
                          ended.start_ns, ended.end_ns, attributes, ended.error,
                          _events(ended)))
        # in the order they ended, as live spans reach their processors: the turn's last
        ordered = sorted(spans[1:], key=lambda span: span[6]) + spans[:1]
        return turn.trace_id, int(turn.flags), tuple(turn.state.items()), ordered


def _events(ended: Ended) -> list[tuple[str, int, dict[str, AttributeValue]]]:
    """The span's exception event, as the SDK's ``record_exception`` writes it."""
    error = ended.exception
    if error is None:
        return []
    module, name = type(error).__module__, type(error).__qualname__
    return [("exception", ended.end_ns, {
        "exception.type": f"{module}.{name}" if module and module != "builtins" else name,
        "exception.message": str(error),
        "exception.stacktrace": "".join(traceback.format_exception(error)),
        "exception.escaped": "False"})]
