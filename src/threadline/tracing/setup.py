"""``Tracing``: threadline's traces, wired to OpenTelemetry.

Give it to the engine as its tracer and to the HTTP service (``create_app(tracing=...)``),
which then takes the trace context of each request. Two ways in:

- ``Tracing.from_config`` exports as the ``OTEL_*`` environment describes
  (``tracing/config.py``; the SDK reads its own variables: sampler, resource, limits,
  endpoint). The turn's spans are recorded (``recorder.py``) and built and exported by a
  process of their own (``relay.py``), so a turn pays little for its spans, never waits for a
  receiver and never fails when one is down.
- ``Tracing(provider)`` makes live spans through a provider the application already set up
  (the global provider by default), with its own span processors: for instance the SDK's
  in-memory exporter in tests, or an observability vendor's processor.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from threadline.tracing.config import TraceConfig
from threadline.tracing.propagation import TraceContextMiddleware
from threadline.tracing.recorder import Recorder
from threadline.tracing.sink import SCOPE, Sink, resource
from threadline.tracing.spans import OTelTracer
from threadline.turn.trace import Span, Tracer
from threadline.version import __version__

if TYPE_CHECKING:
    from starlette.applications import Starlette


class Tracing:
    """The engine's tracer (``span``): live spans over ``provider`` (default: the global
    one), or, made by ``recorded`` and ``from_config``, spans recorded for a sink."""

    span: Callable[..., AbstractContextManager[Span]]  # its tracer's (turn/trace.py)

    def __init__(self, provider: trace.TracerProvider | None = None, *,
                 capture_content: bool = False) -> None:
        self.provider = provider if provider is not None else trace.get_tracer_provider()
        self.tracer: Tracer = OTelTracer(self.provider.get_tracer(SCOPE, __version__),
                                         capture_content=capture_content)
        self.capture_content = capture_content
        self.recorder: Recorder | None = None
        self.span = self.tracer.span  # what the engine calls, at every step: no extra call

    @classmethod
    def recorded(cls, sink: Sink, *, provider: TracerProvider | None = None,
                 capture_content: bool = False) -> Tracing:
        """Spans recorded during each turn and handed to ``sink`` after it, a batch at a
        time, sampled and identified as ``provider`` (default: one the OTEL_* environment
        configures) would (its span processors are not used)."""
        if provider is None:
            provider = TracerProvider(resource=resource(), shutdown_on_exit=False)
        tracing = cls(provider, capture_content=capture_content)
        tracing.tracer = tracing.recorder = Recorder(
            sink, sampler=provider.sampler, ids=provider.id_generator,
            capture_content=capture_content)
        tracing.span = tracing.recorder.span
        atexit.register(tracing.shutdown)  # what waits is exported as the process ends
        return tracing

    @classmethod
    def from_config(cls, config: TraceConfig) -> Tracing:
        """Spans exported as ``config`` says by a relay process (``relay.py``; the SDK reads
        the rest of the OTEL_* variables itself, there and here); shut down with
        ``shutdown`` or at exit."""
        from threadline.tracing.relay import Relay

        return cls.recorded(Relay(config.exporters), capture_content=config.capture_content)

    @property
    def guards_itself(self) -> bool:
        """Whether the engine may call it unguarded (``turn/trace.py``): a recorder may."""
        return bool(getattr(self.tracer, "guards_itself", False))

    @property
    def dropped_turns(self) -> int:
        """Traced turns whose spans were dropped: the recorder's queue was full, or its
        relay behind or gone (0 for live spans: a provider's processors count their own)."""
        if self.recorder is None:
            return 0
        batches = self.recorder.batches
        return batches.dropped + int(getattr(batches.sink, "dropped", 0))

    @property
    def relay_restarts(self) -> int:
        """Times the span relay was started again after it exited."""
        if self.recorder is None:
            return 0
        return int(getattr(self.recorder.batches.sink, "restarts", 0))

    def install(self, app: Starlette) -> None:
        """Take each request's trace context (``tracing/propagation.py``)."""
        app.add_middleware(TraceContextMiddleware)

    def flush(self, timeout_ms: int = 30_000) -> bool:
        """Export what is waiting now; False if it did not finish in time."""
        if self.recorder is not None:
            return self.recorder.flush(timeout_ms)
        flush = getattr(self.provider, "force_flush", None)
        return True if flush is None else bool(flush(timeout_ms))

    def shutdown(self) -> None:
        """Export what waits and stop recording, if this records (a provider given to it is
        the caller's to shut down)."""
        if self.recorder is not None:
            atexit.unregister(self.shutdown)
            self.recorder.shutdown()
