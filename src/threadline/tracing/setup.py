"""``Tracing``: threadline's traces, wired to an OpenTelemetry tracer provider.

Give it to the engine as its tracer and to the HTTP service (``create_app(tracing=...)``),
which then takes the trace context of each request. ``Tracing.from_config`` builds the
provider the ``OTEL_*`` environment describes (``tracing/config.py``): a batch span processor
per exporter, so spans leave in a background thread and a turn never waits for a receiver,
nor fails when one is down. ``Tracing(provider)`` uses one the application already set up
(the global provider by default), for instance with the SDK's in-memory exporter in tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from threadline.tracing.config import TraceConfig
from threadline.tracing.propagation import TraceContextMiddleware
from threadline.tracing.spans import OpenSpan, OTelTracer, Skipped
from threadline.turn.trace import Fact, Step
from threadline.version import __version__

if TYPE_CHECKING:
    from starlette.applications import Starlette

SCOPE = "threadline"


class Tracing:
    """The engine's tracer (``span``), over ``provider`` (default: the global one)."""

    def __init__(self, provider: trace.TracerProvider | None = None, *,
                 capture_content: bool = False) -> None:
        self.provider = provider if provider is not None else trace.get_tracer_provider()
        self.tracer = OTelTracer(self.provider.get_tracer(SCOPE, __version__),
                                 capture_content=capture_content)
        self._owned = False

    @classmethod
    def from_config(cls, config: TraceConfig) -> Tracing:
        """A provider of its own, exporting as ``config`` says (the SDK reads the rest of
        the OTEL_* variables itself); shut down with ``shutdown`` or at exit."""
        provider = TracerProvider(resource=resource())
        for name in config.exporters:
            provider.add_span_processor(BatchSpanProcessor(exporter(name)))
        tracing = cls(provider, capture_content=config.capture_content)
        tracing._owned = True
        return tracing

    @property
    def capture_content(self) -> bool:
        return self.tracer.capture_content

    def span(self, step: Step, name: str = "", *facts: Fact) -> OpenSpan | Skipped:
        return self.tracer.span(step, name, *facts)

    def install(self, app: Starlette) -> None:
        """Take each request's trace context (``tracing/propagation.py``)."""
        app.add_middleware(TraceContextMiddleware)

    def flush(self, timeout_ms: int = 30_000) -> bool:
        """Export what is waiting now; False if it did not finish in time."""
        flush = getattr(self.provider, "force_flush", None)
        return True if flush is None else bool(flush(timeout_ms))

    def shutdown(self) -> None:
        """Flush and stop a provider this made (one given to it is the caller's)."""
        if self._owned and isinstance(self.provider, TracerProvider):
            self.provider.shutdown()


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
