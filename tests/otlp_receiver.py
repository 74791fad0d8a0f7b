"""An OTLP/HTTP receiver (protobuf) that the telemetry tests start: what the SDK's exporters send, as they send it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP receiver (protobuf): what it was sent, by path, and the headers."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: dict[str, list[bytes]] = {}
        self.headers_seen: list[dict[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.setdefault(self.path, []).append(body)
        self.server.headers_seen.append(dict(self.headers))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver serving in a thread of its own until the block ends."""
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def spans_of(server: Receiver) -> list[tuple[str, Any]]:
    """Every span the receiver was sent, with its service's name."""
    found = []
    for body in server.received.get("/v1/traces", []):
        for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}.get("service.name", "")
            found += [(service, span) for scope in resource_spans.scope_spans for span in scope.spans]
    return found


def metric_names(server: Receiver) -> set[str]:
    return {
        m.name
        for body in server.received.get("/v1/metrics", [])
        for rm in ExportMetricsServiceRequest.FromString(body).resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }


def attributes(span: Any) -> dict[str, Any]:
    """A protobuf span's attributes as plain values."""
    out: dict[str, Any] = {}
    for a in span.attributes:
        kind = a.value.WhichOneof("value")
        out[a.key] = getattr(a.value, kind) if kind else None
    return out
