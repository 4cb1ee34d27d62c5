"""Traces are off unless the OTEL_* environment configures them; what it cannot honour is
refused with the variable's name."""

from __future__ import annotations

import pytest

from threadline import tracing
from threadline.errors import InputError
from threadline.tracing.config import TraceConfig, trace_config


@pytest.mark.parametrize("env", [
    {}, {"OTEL_SERVICE_NAME": "chat"}, {"OTEL_TRACES_EXPORTER": "none"},
    {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"},
    {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "TRUE"}])
def test_traces_are_off_unless_configured(env: dict[str, str]) -> None:
    assert trace_config(env) is None


@pytest.mark.parametrize(("env", "exporters"), [
    ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ("otlp",)),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, ("otlp",)),
    ({"OTEL_TRACES_EXPORTER": "otlp,console"}, ("otlp", "console")),
    ({"OTEL_TRACES_EXPORTER": "Console", "OTEL_SDK_DISABLED": "false"}, ("console",)),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
     ("otlp",))])
def test_an_exporter_or_an_endpoint_turns_traces_on(env: dict[str, str],
                                                    exporters: tuple[str, ...]) -> None:
    assert trace_config(env) == TraceConfig(exporters, capture_content=False)


@pytest.mark.parametrize(("env", "named"), [
    ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
    ({"OTEL_TRACES_EXPORTER": "otlp,none"}, "OTEL_TRACES_EXPORTER"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
     "OTEL_EXPORTER_OTLP_PROTOCOL"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":
      "http/json", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
     "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
    ({"OTEL_TRACES_EXPORTER": "console",
      "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "maybe"},
     "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")])
def test_what_cannot_be_honoured_is_refused_by_name(env: dict[str, str], named: str) -> None:
    with pytest.raises(InputError) as refused:
        trace_config(env)
    assert named in refused.value.message and refused.value.hint


def test_configured_without_the_extra_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "available", lambda: False)
    with pytest.raises(InputError) as refused:
        tracing.from_environment({"OTEL_TRACES_EXPORTER": "otlp"})
    assert "threadline[otel]" in (refused.value.hint or "")
    assert tracing.from_environment({}) is None  # unconfigured: no extra needed


def test_the_service_name_defaults_to_threadline(monkeypatch: pytest.MonkeyPatch) -> None:
    from threadline.tracing.setup import resource

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert resource().attributes["service.name"] == "threadline"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "support-bot")
    assert resource().attributes["service.name"] == "support-bot"
    monkeypatch.delenv("OTEL_SERVICE_NAME")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=desk,deployment.env=test")
    found = resource().attributes
    assert found["service.name"] == "desk" and found["deployment.env"] == "test"
