"""Where recorded turns go (``recorder.py``), and how they become the SDK's spans.

A recorded turn is plain data, so that ``marshal`` can carry it to another process
(``relay.py``): the trace's id, flags and state, and one ``(name, kind, span id, parent span
id, parent is remote, start ns, end ns, attributes, error, events)`` per span, in the order
the spans ended (the turn's last), as live spans reach their processors. ``sdk_spans`` builds
the SDK's own ``ReadableSpan`` from it, so the span processors and exporters that receive
them are the SDK's; ``resource`` and ``exporter`` are what they are exported as, and with.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.environment_variables import OTEL_BSP_MAX_EXPORT_BATCH_SIZE
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags, TraceState
from opentelemetry.trace.status import Status, StatusCode

from threadline.version import __version__

log = logging.getLogger("threadline.trace")

SCOPE = "threadline"  # the instrumentation scope threadline's spans are exported under

RecordedTurn = tuple[int, int, tuple[tuple[str, str], ...], list[tuple[Any, ...]]]


class Sink(Protocol):
    """Where recorded turns go, a batch at a time."""

    def export(self, turns: Sequence[RecordedTurn]) -> None:
        """Take the turns' spans (perhaps none); never blocks on a receiver."""
        ...

    def flush(self, timeout_ms: int) -> bool:
        """Export what is waiting now; False if it did not finish in time."""
        ...

    def shutdown(self) -> None:
        ...


def sdk_spans(turn: RecordedTurn, resource: Resource, scope: InstrumentationScope,
              limits: SpanLimits) -> Iterator[ReadableSpan]:
    """A recorded turn's spans as the SDK's, attributes bounded by ``limits`` as its own
    spans' are."""
    trace_id, flags, state_items, spans = turn
    trace_flags, state = TraceFlags(flags), TraceState(list(state_items))
    for (name, kind, span_id, parent_id, remote, start, end, attributes, error,
         events) in spans:
        parent = None if not parent_id else SpanContext(trace_id, parent_id, remote,
                                                        trace_flags, state)
        yield ReadableSpan(
            name=name, kind=SpanKind(kind),
            context=SpanContext(trace_id, span_id, False, trace_flags, state), parent=parent,
            resource=resource, instrumentation_scope=scope,
            attributes=BoundedAttributes(limits.max_span_attributes, attributes,
                                         max_value_len=limits.max_span_attribute_length),
            events=[Event(event, BoundedAttributes(limits.max_event_attributes, values,
                                                   max_value_len=limits.max_attribute_length),
                          at) for event, at, values in events],
            status=Status(StatusCode.UNSET) if error is None else Status(StatusCode.ERROR,
                                                                          error),
            start_time=start, end_time=end)


class ToExporters:
    """A sink in this process: each batch's spans built and exported, at most
    ``max_batch`` spans to a call (default: OTEL_BSP_MAX_EXPORT_BATCH_SIZE, as the SDK's
    batch processor has it), by each exporter in turn, on the thread that hands the batch
    over (the relay's loop; the recorder's thread, in tests with the SDK's in-memory
    exporter). An exporter that raises is logged and the others go on."""

    def __init__(self, exporters: Sequence[SpanExporter], resource: Resource,
                 scope: InstrumentationScope, *, limits: SpanLimits | None = None,
                 max_batch: int | None = None) -> None:
        self.exporters = list(exporters)
        self.resource, self.scope = resource, scope
        self.limits = limits if limits is not None else SpanLimits()
        self.max_batch = max_batch if max_batch is not None else int(
            os.environ.get(OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "512"))

    @classmethod
    def named(cls, names: Sequence[str]) -> ToExporters:
        """The exporters ``names`` names (``otlp``, ``console``), threadline's resource and
        scope: what the relay exports with, or this process when the relay never started."""
        return cls([exporter(name) for name in names], resource(),
                   InstrumentationScope(SCOPE, __version__))

    def export(self, turns: Sequence[RecordedTurn]) -> None:
        spans = [span for turn in turns
                 for span in sdk_spans(turn, self.resource, self.scope, self.limits)]
        for start in range(0, len(spans), self.max_batch):
            batch = spans[start:start + self.max_batch]
            for exporter in self.exporters:
                try:
                    exporter.export(batch)
                except Exception:  # noqa: BLE001 - one exporter's failure is its own
                    log.exception("%s failed to export %d spans", type(exporter).__name__,
                                  len(batch))

    def flush(self, timeout_ms: int) -> bool:
        return all(exporter.force_flush(timeout_ms) for exporter in self.exporters)

    def shutdown(self) -> None:
        for exporter in self.exporters:
            exporter.shutdown()


def resource() -> Resource:
    """The SDK's resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES), named threadline
    where the environment names no service."""
    found = dict(Resource.create().attributes)
    if str(found.get(SERVICE_NAME, "")).startswith("unknown_service"):
        found[SERVICE_NAME] = "threadline"
    found.setdefault(SERVICE_VERSION, __version__)
    return Resource(found)


def exporter(name: str) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # endpoint, headers, timeout, compression: OTEL_EXPORTER_OTLP_*
