"""Whether traces are on, read from OpenTelemetry's standard environment variables.

Traces are off unless configured: on when ``OTEL_TRACES_EXPORTER`` names an exporter, or
when an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT``; the exporter is then ``otlp``), unless
``OTEL_SDK_DISABLED=true`` or the exporter is ``none``. Everything else the SDK reads itself:
the endpoint, headers, timeout and compression (``OTEL_EXPORTER_OTLP_*``), the batch
processor's sizes (``OTEL_BSP_*``), the sampler (``OTEL_TRACES_SAMPLER``), the service name
and resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``) and, for incoming
requests, the propagators (``OTEL_PROPAGATORS``).

Message content goes on the spans only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
opts in (``true``, or ``span_only`` / ``span_and_event`` as OpenTelemetry's GenAI
instrumentations spell it). This module needs no OpenTelemetry package: a configuration
error is found, and said, whether or not the ``otel`` extra is installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from threadline.errors import InputError

EXPORTERS = ("otlp", "console")
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CAPTURE_ON = {"true", "1", "span_only", "span_and_event"}
_CAPTURE_OFF = {"", "false", "0", "no_content", "event_only"}  # no events are emitted


@dataclass(frozen=True)
class TraceConfig:
    exporters: tuple[str, ...]  # of EXPORTERS
    capture_content: bool = False


def trace_config(env: Mapping[str, str]) -> TraceConfig | None:
    """The traces ``env`` asks for; None when it asks for none. InputError for a value that
    cannot be honoured, naming the variable."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    named = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT")
    if not named:
        if not endpoint:
            return None
        named = "otlp"
    exporters = tuple(dict.fromkeys(x.strip() for x in named.split(",") if x.strip()))
    unknown = [x for x in exporters if x not in (*EXPORTERS, "none")]
    if unknown:
        raise InputError(f"OTEL_TRACES_EXPORTER={named!r}: threadline exports traces with "
                         f"{', '.join(EXPORTERS)} or none, not {', '.join(unknown)}",
                         hint="set OTEL_TRACES_EXPORTER=otlp (OTLP over HTTP) or unset it")
    if "none" in exporters:
        if len(exporters) > 1:
            raise InputError(f"OTEL_TRACES_EXPORTER={named!r} names 'none' beside other "
                             "exporters", hint="name the exporters, or just none")
        return None
    if "otlp" in exporters:
        _check_protocol(env)
    return TraceConfig(exporters, capture_content=capture_content(env))


def capture_content(env: Mapping[str, str]) -> bool:
    value = env.get(CAPTURE, "").strip().lower()
    if value in _CAPTURE_ON:
        return True
    if value in _CAPTURE_OFF:
        return False
    raise InputError(f"{CAPTURE}={env[CAPTURE]!r} is neither on nor off",
                     hint="use true (or span_only) to record message content on spans, "
                          "false (or no_content) not to")


def _check_protocol(env: Mapping[str, str]) -> None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = env.get(name, "").strip()
        if protocol:
            if protocol != "http/protobuf":
                raise InputError(f"{name}={protocol!r}: threadline exports OTLP over HTTP "
                                 "with protobuf (the otel extra's exporter)",
                                 hint=f"set {name}=http/protobuf, and the endpoint to the "
                                      "receiver's HTTP port (usually 4318)")
            return
