"""What each step's span says, from the facts the engine hands over: its name, kind,
attributes, and the error it ended in. Both ways of making spans read it (``spans.py``, live
SDK spans; ``recorder.py``, spans recorded during the turn and built after it), so the two
export the same spans, named and attributed as docs/observability.md lists:

    threadline.turn
      threadline.provider NAME      each context provider's gather
      threadline.ingest             the message made durable
      chat MODEL                    each model call (GenAI inference span)
      threadline.commit KIND        each commit of a call's outcome
      execute_tool TOOL             each tool call (GenAI execute-tool span)

Where the turn is (its conversation, branch and index) is learned from its input, its message
or its first call into a ``Where`` shared by the turn's steps, and stamped, as each span ends,
on the turn's span and the GenAI spans, which carry ``gen_ai.conversation.id`` exactly as the
log names the conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from opentelemetry.trace import SpanKind
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
    """Where the current turn is, as far as it is known yet; shared by the turn's steps."""

    __slots__ = ("conversation_id", "branch", "index")

    def __init__(self) -> None:
        self.conversation_id: str | None = None
        self.branch: str | None = None
        self.index: int | None = None

    def learn(self, conversation_id: str | None, branch: str | None,
              index: int | None) -> None:
        """What a step found out about the turn (the first value found is kept)."""
        if self.conversation_id is None:
            self.conversation_id = conversation_id
        if self.branch is None:
            self.branch = branch
        if self.index is None:
            self.index = index

    def stamp(self, attributes: Attributes) -> None:
        if self.conversation_id is not None:
            attributes[genai.CONVERSATION] = self.conversation_id
        if self.branch is not None:
            attributes[BRANCH] = self.branch
        if self.index is not None:
            attributes[TURN_INDEX] = self.index


class Ended(NamedTuple):
    """A step's span as it ended."""

    name: str
    kind: SpanKind
    start_ns: int
    end_ns: int
    attributes: Attributes
    error: str | None               # the ERROR status's description; None: no error
    exception: BaseException | None  # recorded as the span's exception event


class StepSpan:
    """A step's span as the facts describe it: ``begin`` names it and sets what is known at
    its start, ``fact`` adds what the step learned, ``ended`` closes it."""

    kind = SpanKind.INTERNAL
    stamped = False  # carries where the turn is

    def __init__(self, name: str, facts: Sequence[Fact], where: Where,
                 capture_content: bool) -> None:
        self.where = where
        self.capture_content = capture_content
        self.attributes: Attributes = {}
        self.error: str | None = None
        self.name = self.begin(name, facts)

    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        raise NotImplementedError

    def fact(self, fact: Fact, at_ns: int) -> None:
        """What the step learned, at ``at_ns`` (the epoch's nanoseconds)."""

    def times(self, entered_ns: int, left_ns: int) -> tuple[int, int]:
        return entered_ns, left_ns

    def failure(self) -> BaseException | None:
        """An error the step reported without raising it (a failed model call)."""
        return None

    def ended(self, entered_ns: int, left_ns: int, raised: BaseException | None) -> Ended:
        """The span, entered and left at those times, with the exception that left it."""
        error = raised if raised is not None else self.failure()
        description = self.error
        if error is not None:
            self.attributes[genai.ERROR_TYPE] = type(error).__name__
            description = f"{type(error).__name__}: {error}"[:500]
        if self.stamped:
            self.where.stamp(self.attributes)
        start, end = self.times(entered_ns, left_ns)
        return Ended(self.name, self.kind, start, end, self.attributes, description, error)


class TurnStep(StepSpan):
    stamped = True

    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        return "threadline.turn"  # where it is comes from what it records and its steps

    def fact(self, fact: Fact, at_ns: int) -> None:
        if isinstance(fact, TurnInput):
            self.where.learn(fact.conversation_id, fact.branch, None)
        elif isinstance(fact, TurnResult):
            self.where.learn(fact.conversation_id, fact.branch, fact.turn)
            self.attributes["threadline.call.id"] = fact.call.id
            self.attributes["threadline.turn.deduplicated"] = fact.deduplicated


class IngestStep(StepSpan):
    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        return "threadline.ingest"

    def fact(self, fact: Fact, at_ns: int) -> None:
        if isinstance(fact, Item):
            self.where.learn(fact.conversation_id, fact.branch, fact.turn)
            self.attributes["threadline.message.seq"] = fact.seq


class ProviderStep(StepSpan):
    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        self.attributes["threadline.provider.name"] = name
        self.attributes["threadline.provider.found"] = False
        return f"threadline.provider {name}"

    def fact(self, fact: Fact, at_ns: int) -> None:
        if isinstance(fact, NewItem):
            self.attributes["threadline.provider.found"] = True
            self.attributes["threadline.provider.kind"] = str(fact.kind)


class CommitStep(StepSpan):
    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        self.attributes["threadline.commit.kind"] = name
        return f"threadline.commit {name}"

    def fact(self, fact: Fact, at_ns: int) -> None:
        if isinstance(fact, ModelCall):
            self.attributes["threadline.call.id"] = fact.id
            self.attributes["threadline.call.status"] = str(fact.status)
        elif isinstance(fact, Item):
            self.attributes["threadline.reply.seq"] = fact.seq


class ToolStep(StepSpan):
    stamped = True

    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        out = self.attributes
        out[genai.OPERATION] = genai.EXECUTE_TOOL
        out[genai.TOOL_NAME] = name
        out[genai.TOOL_TYPE] = "function"
        for fact in facts:
            if isinstance(fact, Item):
                out[genai.TOOL_CALL_ID] = str(fact.content.get("call_id", ""))
                if self.capture_content:
                    arguments = fact.content.get("malformed_arguments",
                                                 fact.content.get("arguments"))
                    out[genai.TOOL_ARGUMENTS] = canonical_json(arguments)
        return f"{genai.EXECUTE_TOOL} {name}"

    def fact(self, fact: Fact, at_ns: int) -> None:
        if not isinstance(fact, NewItem):
            return
        content = fact.content
        if self.capture_content:
            self.attributes[genai.TOOL_RESULT] = str(content.get("output", ""))
        if content.get("is_error"):
            # the harness answered the model with an error: the tool was refused, or raised
            kind = "tool_call_refused" if content.get("refused") else "tool_error"
            self.attributes[genai.ERROR_TYPE] = self.error = kind
        if "truncated_from_bytes" in content:
            self.attributes["threadline.tool.truncated_from_bytes"] = int(
                content["truncated_from_bytes"])


class ModelCallStep(StepSpan):
    """Timed by the call itself: the time the turn waited for the model's lock, and the
    prefix report measured after, stay out of it."""

    stamped = True

    def begin(self, name: str, facts: Sequence[Fact]) -> str:
        provider, model = genai.provider_and_model(name)
        self.kind = SpanKind.INTERNAL if provider in IN_PROCESS else SpanKind.CLIENT
        out = self.attributes
        for fact in facts:
            if isinstance(fact, Item):  # the branch's head: the turn, wherever it is
                self.where.learn(fact.conversation_id, None, fact.turn)
            elif isinstance(fact, Request) and self.capture_content:
                out[genai.INPUT_MESSAGES] = genai.input_messages(fact.messages)
        out[genai.OPERATION] = genai.CHAT
        out[genai.PROVIDER] = provider
        out[genai.REQUEST_MODEL] = model
        self._outcome: CallOutcome | None = None
        self._called_at: int | None = None
        return f"{genai.CHAT} {model}"

    def times(self, entered_ns: int, left_ns: int) -> tuple[int, int]:
        if self._outcome is None or self._called_at is None:
            return entered_ns, left_ns
        took = int(self._outcome.timings.total_ms * 1e6)
        return max(entered_ns, self._called_at - took), self._called_at

    def failure(self) -> BaseException | None:
        return None if self._outcome is None else self._outcome.error

    def fact(self, fact: Fact, at_ns: int) -> None:
        if isinstance(fact, CallOutcome):
            self._outcome, self._called_at = fact, at_ns
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
        if self.capture_content:
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


STEPS: dict[Step, type[StepSpan]] = {
    Step.TURN: TurnStep, Step.INGEST: IngestStep, Step.PROVIDER: ProviderStep,
    Step.MODEL_CALL: ModelCallStep, Step.TOOL_CALL: ToolStep, Step.COMMIT: CommitStep}

# steps under which other code runs (a provider's, a tool's, a delegated turn): their spans
# are current while they run, so that code's own spans nest under them
OPEN = frozenset({Step.TURN, Step.PROVIDER, Step.TOOL_CALL})
