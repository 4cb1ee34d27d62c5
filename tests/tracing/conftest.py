from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="install the otel extra: scripts/bootstrap otel")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: E402

from threadline.tracing.setup import SCOPE, Tracing  # noqa: E402
from threadline.tracing.sink import ToExporters  # noqa: E402
from threadline.turn.tools import Tool, ToolContext  # noqa: E402
from threadline.version import __version__  # noqa: E402

CITY = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}


HOW = ("live", "recorded")  # the two ways threadline makes spans (threadline/tracing/setup.py)


class Traced:
    """A Tracing whose spans are kept in memory: live spans over a provider of the test's
    own, or (``recorded``) spans recorded during each turn and exported after it, in this
    process, to the same in-memory exporter."""

    def __init__(self, *, capture_content: bool = False, recorded: bool = False) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        if recorded:
            sink = ToExporters([self.exporter], self.provider.resource,
                               InstrumentationScope(SCOPE, __version__))
            self.tracing = Tracing.recorded(sink, provider=self.provider,
                                            capture_content=capture_content)
        else:
            self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
            self.tracing = Tracing(self.provider, capture_content=capture_content)

    @property
    def spans(self) -> list[ReadableSpan]:
        assert self.tracing.flush()  # recorded spans are exported after their turn
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def one(self, name: str) -> ReadableSpan:
        [found] = [s for s in self.spans if s.name == name]
        return found


@pytest.fixture(params=HOW)
def how(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def traced(how: str) -> Iterator[Traced]:
    made = Traced(recorded=how == "recorded")
    yield made
    made.tracing.shutdown()


def tree(spans: Sequence[ReadableSpan]) -> list[Any]:
    """The spans as [name, [children...]] from the roots down, children in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent, []).append(span)

    def node(span: ReadableSpan) -> list[Any]:
        assert span.context is not None
        children = by_parent.get(span.context.span_id, [])
        return [span.name, [node(c) for c in children]] if children else [span.name]
    return [node(root) for root in by_parent.get(None, [])]


def weather(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return f"sunny in {arguments['city']}"


def tools() -> list[Tool]:
    return [Tool("weather", "Weather for a city.", CITY, weather)]
