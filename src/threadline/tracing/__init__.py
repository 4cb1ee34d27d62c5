"""OpenTelemetry traces of every turn (docs/observability.md): a span per turn, and under it
one per step, with the GenAI conventions' attributes and threadline's own.

It needs the ``otel`` extra (opentelemetry-sdk and the OTLP/HTTP exporter); this module does
not, so callers can read the configuration and ask whether the extra is there before
importing the rest (``threadline.tracing.setup``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.util import find_spec
from typing import TYPE_CHECKING

from threadline.errors import InputError
from threadline.tracing.config import TraceConfig, trace_config

if TYPE_CHECKING:
    from threadline.tracing.setup import Tracing

INSTALL_HINT = "pip install 'threadline[otel]'"

__all__ = ["INSTALL_HINT", "TraceConfig", "available", "from_environment", "trace_config"]


def available() -> bool:
    """Whether the OpenTelemetry SDK and its OTLP/HTTP exporter are installed."""
    return find_spec("opentelemetry.sdk") is not None and find_spec(
        "opentelemetry.exporter.otlp.proto.http") is not None


def from_environment(env: Mapping[str, str] | None = None) -> Tracing | None:
    """The traces the ``OTEL_*`` environment asks for (None: off, the default); asked for
    without the otel extra, an InputError that says how to install it."""
    config = trace_config(os.environ if env is None else env)
    if config is None:
        return None
    if not available():
        raise InputError("traces are configured (OTEL_TRACES_EXPORTER or an OTLP endpoint is "
                         "set) but the otel extra is not installed",
                         hint=f"{INSTALL_HINT}, or set OTEL_SDK_DISABLED=true")
    from threadline.tracing.setup import Tracing

    return Tracing.from_config(config)
