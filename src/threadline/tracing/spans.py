"""The engine's tracer (``turn/trace.py``) over an OpenTelemetry tracer.

One span per turn (``threadline.turn``), and under it a span per step, named and attributed
as docs/observability.md lists:

    threadline.turn
      threadline.provider NAME      each context provider's gather
      threadline.ingest             the message made durable
      chat MODEL                    each model call (GenAI inference span)
      threadline.commit KIND        each commit of a call's outcome
      execute_tool TOOL             each tool call (GenAI execute-tool span)

Where the turn is (its conversation, branch and index) is learned once, from its input, its
message or its first call, kept in a context variable for the turn, and stamped on the GenAI
spans, which carry ``gen_ai.conversation.id`` exactly as the log names the conversation.

Spans of threadline's own work with nothing under them (ingest, commit, the model call) are
made in one go as the step ends (one call into the SDK each); a model call's with the call's
own start and end, so the time the turn waited for the model's lock, and the prefix report
measured after, stay out of it. Providers and tools run code that may be traced itself (an
HTTP client, a database driver): their spans are current while they run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextvars import ContextVar, Token
from types import TracebackType

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from threadline.cache.prefix import PrefixReport
from threadline.calls import ModelCall
from threadline.items import Item, NewItem, canonical_json
from threadline.models.calling import CallOutcome
from threadline.request import Request
from threadline.tracing import genai
from threadline.turn.input import TurnInput
from threadline.turn.result import TurnResult
from threadline.turn.trace import Fact, Step

Attributes = dict[str, AttributeValue]

TURN_INDEX = "threadline.turn.index"
BRANCH = "threadline.branch"
IN_PROCESS = {"llama.cpp", "threadline.scripted"}  # models run in this process: INTERNAL


class Where:
    """Where the current turn is, as far as it is known yet; shared by the turn's spans."""

    __slots__ = ("span", "conversation_id", "branch", "index")

    def __init__(self, span: trace.Span | None) -> None:
        self.span = span
        self.conversation_id: str | None = None
        self.branch: str | None = None
        self.index: int | None = None

    def learn(self, conversation_id: str | None, branch: str | None,
              index: int | None) -> None:
        """What a step found out about the turn, also set on the turn's span."""
        found: Attributes = {}
        if conversation_id is not None and self.conversation_id is None:
            self.conversation_id = found[genai.CONVERSATION] = conversation_id
        if branch is not None and self.branch is None:
            self.branch = found[BRANCH] = branch
        if index is not None and self.index is None:
            self.index = found[TURN_INDEX] = index
        if found and self.span is not None:
            self.span.set_attributes(found)

    def stamp(self, attributes: Attributes) -> None:
        if self.conversation_id is not None:
            attributes[genai.CONVERSATION] = self.conversation_id
        if self.branch is not None:
            attributes[BRANCH] = self.branch
        if self.index is not None:
            attributes[TURN_INDEX] = self.index


_WHERE: ContextVar[Where | None] = ContextVar("threadline_turn", default=None)


def _where() -> Where:
    """The current turn's; outside one (a step run on its own), a fresh one for the step."""
    return _WHERE.get() or Where(None)


def _failed(span: trace.Span, error: BaseException) -> None:
    span.set_attribute(genai.ERROR_TYPE, type(error).__name__)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))
    span.record_exception(error)


class OpenSpan:
    """A step's span, started when entered and current until left."""

    kind = SpanKind.INTERNAL

    def __init__(self, tracer: OTelTracer, name: str, facts: Sequence[Fact]) -> None:
        self.tracer = tracer
        self.where = _where()
        self.attributes: Attributes = {}
        self.name = self.begin(name, facts)
        self.span: trace.Span = trace.INVALID_SPAN
        self._token: Token[Context] | None = None

    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        """The span's name; fills ``attributes`` with what is known at its start."""
        raise NotImplementedError

    def fact(self, fact: Fact) -> None:
        """What the step learned (called between enter and exit)."""

    def record(self, *facts: Fact) -> None:
        for fact in facts:
            self.fact(fact)

    def __enter__(self) -> OpenSpan:
        self.span = self.tracer.otel.start_span(self.name, kind=self.kind,
                                                attributes=self.attributes)
        self._token = context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        try:
            if error is not None:
                _failed(self.span, error)
            self.span.end()
        finally:
            if self._token is not None:
                context.detach(self._token)


class LeafSpan(OpenSpan):
    """A span of threadline's own work, under which nothing else runs: made in one go when
    the step ends (one call into the SDK, with every attribute), from when it was entered."""

    def __enter__(self) -> LeafSpan:
        self._entered = time.time_ns()
        return self

    def times(self) -> tuple[int, int]:
        return self._entered, time.time_ns()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        started, ended = self.times()
        span = self.tracer.otel.start_span(self.name, kind=self.kind,
                                           attributes=self.attributes, start_time=started)
        failure = error if error is not None else self.failure()
        if failure is not None:
            _failed(span, failure)
        span.end(end_time=ended)

    def failure(self) -> BaseException | None:
        return None


class TurnSpan(OpenSpan):
    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        return "threadline.turn"

    def __enter__(self) -> TurnSpan:
        super().__enter__()
        self.where = Where(self.span)
        self._turn_token = _WHERE.set(self.where)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        _WHERE.reset(self._turn_token)
        super().__exit__(kind, error, traceback)

    def fact(self, fact: Fact) -> None:
        if isinstance(fact, TurnInput):
            self.where.learn(fact.conversation_id, fact.branch, None)
        elif isinstance(fact, TurnResult):
            self.where.learn(fact.conversation_id, fact.branch, fact.turn)
            self.span.set_attributes({"threadline.call.id": fact.call.id,
                                      "threadline.turn.deduplicated": fact.deduplicated})


class IngestSpan(LeafSpan):
    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        return "threadline.ingest"

    def fact(self, fact: Fact) -> None:
        if isinstance(fact, Item):
            self.where.learn(fact.conversation_id, fact.branch, fact.turn)
            self.attributes["threadline.message.seq"] = fact.seq


class ProviderSpan(OpenSpan):
    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        self.attributes.update({"threadline.provider.name": name,
                                "threadline.provider.found": False})
        return f"threadline.provider {name}"

    def fact(self, fact: Fact) -> None:
        if isinstance(fact, NewItem):
            self.span.set_attributes({"threadline.provider.found": True,
                                      "threadline.provider.kind": str(fact.kind)})


class CommitSpan(LeafSpan):
    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        self.attributes["threadline.commit.kind"] = name
        return f"threadline.commit {name}"

    def fact(self, fact: Fact) -> None:
        if isinstance(fact, ModelCall):
            self.attributes["threadline.call.id"] = fact.id
            self.attributes["threadline.call.status"] = str(fact.status)
        elif isinstance(fact, Item):
            self.attributes["threadline.reply.seq"] = fact.seq


class ToolSpan(OpenSpan):
    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        self.where.stamp(self.attributes)
        self.attributes.update({genai.OPERATION: genai.EXECUTE_TOOL, genai.TOOL_NAME: name,
                                genai.TOOL_TYPE: "function"})
        for fact in facts:
            if isinstance(fact, Item):
                self.attributes[genai.TOOL_CALL_ID] = str(fact.content.get("call_id", ""))
                if self.tracer.capture_content:
                    arguments = fact.content.get("malformed_arguments",
                                                 fact.content.get("arguments"))
                    self.attributes[genai.TOOL_ARGUMENTS] = canonical_json(arguments)
        return f"{genai.EXECUTE_TOOL} {name}"

    def fact(self, fact: Fact) -> None:
        if not isinstance(fact, NewItem):
            return
        content = fact.content
        if self.tracer.capture_content:
            self.span.set_attribute(genai.TOOL_RESULT, str(content.get("output", "")))
        if content.get("is_error"):
            # the harness answered the model with an error: the tool was refused, or raised
            kind = "tool_call_refused" if content.get("refused") else "tool_error"
            self.span.set_attribute(genai.ERROR_TYPE, kind)
            self.span.set_status(Status(StatusCode.ERROR, kind))
        if "truncated_from_bytes" in content:
            self.span.set_attribute("threadline.tool.truncated_from_bytes",
                                    int(content["truncated_from_bytes"]))


class ModelCallSpan(LeafSpan):
    """Made when the step ends, with the call's own times (see the module's docstring)."""

    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        provider, model = genai.provider_and_model(name)
        self.kind = SpanKind.INTERNAL if provider in IN_PROCESS else SpanKind.CLIENT
        for fact in facts:
            if isinstance(fact, Item):  # the branch's head: the turn, wherever it is
                self.where.learn(fact.conversation_id, None, fact.turn)
        self.where.stamp(self.attributes)
        self.attributes.update({genai.OPERATION: genai.CHAT, genai.PROVIDER: provider,
                                genai.REQUEST_MODEL: model})
        if self.tracer.capture_content:
            for fact in facts:
                if isinstance(fact, Request):
                    self.attributes[genai.INPUT_MESSAGES] = genai.input_messages(
                        fact.messages)
        self._outcome: CallOutcome | None = None
        self._times: tuple[int, int] | None = None
        return f"{genai.CHAT} {model}"

    def times(self) -> tuple[int, int]:
        return self._times or super().times()

    def failure(self) -> BaseException | None:
        return None if self._outcome is None else self._outcome.error

    def fact(self, fact: Fact) -> None:
        if isinstance(fact, CallOutcome):
            ended = time.time_ns()
            started = max(self._entered, ended - int(fact.timings.total_ms * 1e6))
            self._outcome, self._times = fact, (started, ended)
            self._called(fact)
        elif isinstance(fact, PrefixReport):
            self._prefix(fact)

    def _called(self, outcome: CallOutcome) -> None:
        out = self.attributes
        completion = outcome.completion
        if completion is None:
            return
        usage = completion.usage
        out[genai.INPUT_TOKENS] = usage.prompt_tokens
        out[genai.OUTPUT_TOKENS] = usage.completion_tokens
        out[genai.CACHE_READ_TOKENS] = usage.cached_tokens
        written = genai.cache_written(completion)
        if written is not None:
            out[genai.CACHE_CREATION_TOKENS] = written
        out[genai.FINISH_REASONS] = [completion.finish_reason]
        if completion.timings.ttft_ms is not None:
            out[genai.TIME_TO_FIRST_CHUNK] = completion.timings.ttft_ms / 1000
        if self.tracer.capture_content:
            out[genai.OUTPUT_MESSAGES] = genai.output_messages(completion)

    def _prefix(self, found: PrefixReport) -> None:
        out = self.attributes
        out["threadline.prefix.reuse_ratio"] = round(found.ratio, 6)
        out["threadline.prefix.cause"] = str(found.cause)
        out["threadline.prefix.expected"] = found.expected
        if found.reused_tokens is not None:
            out["threadline.prefix.reused_tokens"] = found.reused_tokens
        if found.divergence is not None and found.divergence.segment is not None:
            out["threadline.prefix.segment"] = found.divergence.segment
        if found.compaction_seq is not None:
            out["threadline.compaction.seq"] = found.compaction_seq
        if found.reused_from is not None:
            out["threadline.prefix.reused_from"] = found.reused_from



_SPANS: dict[Step, type[OpenSpan]] = {
    Step.TURN: TurnSpan, Step.INGEST: IngestSpan, Step.PROVIDER: ProviderSpan,
    Step.MODEL_CALL: ModelCallSpan, Step.TOOL_CALL: ToolSpan, Step.COMMIT: CommitSpan}


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

    def span(self, step: Step, name: str = "", *facts: Fact) -> OpenSpan | Skipped:
        if step is not Step.TURN:
            where = _WHERE.get()
            if where is not None and where.span is not None and not where.span.is_recording():
                return SKIPPED
        return _SPANS[step](self, name, facts)
