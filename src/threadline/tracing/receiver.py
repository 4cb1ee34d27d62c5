"""A local OTLP/HTTP trace receiver, for tests, benchmarks and dry runs.

No OpenTelemetry Collector or Jaeger with an OTLP receiver installs from the registries
threadline's machines reach (docs/observability.md says what was looked at), so this is a
receiver built on OTLP's own protobuf types (``opentelemetry-proto``, which the otel extra's
exporter depends on): an HTTP server on 127.0.0.1 that answers ``POST /v1/traces`` as a
collector does, decodes each ``ExportTraceServiceRequest`` (gzip or not) and keeps its spans,
decoded, to assert on. Anything else gets the status a collector would give it (404, 405,
415, 400), and nothing is kept.

    with OTLPReceiver() as receiver:   # OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint
        ...
        spans = receiver.wait_for(lambda spans: len(spans) >= 6)

Or in a process of its own, as a collector would be (the telemetry benchmark runs it so):

    python -m threadline.tracing.receiver [--port 4318] [--print]

prints ``{"endpoint": ...}`` on its first line, each span as a JSON line with ``--print``,
and, once its standard input ends (or on Ctrl-C), ``{"spans": N, "requests": M, ...}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class ReceivedSpan:
    """A span as it arrived, decoded: ids in hex, attributes as Python values."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    kind: str            # SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT, ...
    attributes: Mapping[str, Any]
    status: str          # STATUS_CODE_UNSET, STATUS_CODE_OK, STATUS_CODE_ERROR
    status_message: str
    start_ns: int
    end_ns: int
    events: tuple[str, ...]
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope: str = ""


def value_of(value: AnyValue) -> Any:
    """An OTLP AnyValue as the Python value it carries."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return getattr(value, which)


def attributes_of(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pair: KeyValue
    for pair in pairs:
        out[pair.key] = value_of(pair.value)
    return out


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ExportTraceServiceRequest."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    found = []
    for resource_spans in request.resource_spans:
        resource = attributes_of(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(ReceivedSpan(
                    name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex() or None,
                    kind=Span.SpanKind.Name(span.kind), attributes=attributes_of(
                        span.attributes),
                    status=Status.StatusCode.Name(span.status.code),
                    status_message=span.status.message, start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    events=tuple(event.name for event in span.events), resource=resource,
                    scope=scope_spans.scope.name))
    return found


class OTLPReceiver:
    """Receives OTLP/HTTP traces on 127.0.0.1 (``port`` 0: any free one) until stopped."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 on_span: Callable[[ReceivedSpan], None] | None = None,
                 keep: bool = True) -> None:
        """``on_span`` sees each span as it arrives; with ``keep`` False none is kept (a
        long-running receiver counts them only)."""
        self._on_span, self._keep = on_span, keep
        self.received = 0   # spans received, kept or not
        self._lock = threading.Condition()
        self._spans: list[ReceivedSpan] = []
        self.requests = 0   # export requests accepted
        self.refused = 0    # requests answered with an error status
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                status, body = receiver._receive(self.path, self.headers.get(
                    "Content-Type", ""), self.headers.get("Content-Encoding", ""),
                    self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.send_response(status)
                self.send_header("Content-Type", PROTOBUF if status == 200 else "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                self.send_error(405, "OTLP/HTTP takes POST")

            def log_message(self, format: str, *args: Any) -> None:
                return None  # quiet: a test's output is its own

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="otlp-receiver", daemon=True)

    @property
    def endpoint(self) -> str:
        """The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/traces)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def start(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> OTLPReceiver:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()

    def wait_for(self, done: Callable[[list[ReceivedSpan]], bool], timeout_s: float = 10.0
                 ) -> list[ReceivedSpan]:
        """The spans received once ``done`` says they are enough; TimeoutError otherwise."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while not done(self._spans):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the receiver got {len(self._spans)} spans in "
                                       f"{timeout_s}s, not what was waited for")
                self._lock.wait(left)
            return list(self._spans)

    def _receive(self, path: str, content_type: str, encoding: str, body: bytes
                 ) -> tuple[int, bytes]:
        if path.split("?", 1)[0] != "/v1/traces":
            return self._refuse(404, f"no OTLP signal at {path}; traces go to /v1/traces")
        if content_type.split(";", 1)[0].strip() != PROTOBUF:
            return self._refuse(415, f"this receiver takes {PROTOBUF}, not {content_type!r}")
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            spans = decode(body)
        except (DecodeError, OSError, zlib.error) as err:
            return self._refuse(400, f"not an ExportTraceServiceRequest: {err}")
        with self._lock:
            if self._keep:
                self._spans += spans
            self.received += len(spans)
            self.requests += 1
            self._lock.notify_all()
        if self._on_span is not None:
            for span in spans:
                self._on_span(span)
        return 200, ExportTraceServiceResponse().SerializeToString()

    def _refuse(self, status: int, why: str) -> tuple[int, bytes]:
        with self._lock:
            self.refused += 1
        return status, why.encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A local OTLP/HTTP trace receiver.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--print", dest="show", action="store_true",
                        help="print each span as a JSON line")
    args = parser.parse_args(argv)

    def show(span: ReceivedSpan) -> None:
        print(json.dumps(asdict(span), default=str), flush=True)

    with OTLPReceiver(args.host, args.port, on_span=show if args.show else None,
                      keep=False) as receiver:
        print(json.dumps({"endpoint": receiver.endpoint}), flush=True)
        try:
            for _ in sys.stdin:  # until the input ends
                pass
        except KeyboardInterrupt:
            pass
        print(json.dumps({"spans": receiver.received, "requests": receiver.requests,
                          "refused": receiver.refused}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
