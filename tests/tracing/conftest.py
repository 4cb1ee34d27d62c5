from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="install the otel extra: scripts/bootstrap otel")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from threadline.tracing.setup import Tracing  # noqa: E402
from threadline.turn.tools import Tool, ToolContext  # noqa: E402

CITY = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}


class Traced:
    """A Tracing over a provider of the test's own, its spans kept in memory as they end."""

    def __init__(self, *, capture_content: bool = False) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracing = Tracing(self.provider, capture_content=capture_content)

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def one(self, name: str) -> ReadableSpan:
        [found] = [s for s in self.spans if s.name == name]
        return found


@pytest.fixture
def traced() -> Traced:
    return Traced()


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
