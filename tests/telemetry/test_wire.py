"""The wire: with ``OTEL_EXPORTER_OTLP_ENDPOINT``, a run's spans and the metrics reach an OTLP/HTTP receiver (one
this test starts) through the SDK's exporters, as the standard variables configure them; without it nothing is set up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from telemetry_support import ask

from assistant.telemetry import setup

pytestmark = pytest.mark.django_db(transaction=True)


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


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_nothing_is_set_up_without_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    assert setup.configure({}) is None and setup.current() is None
    assert setup.configure({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}) is None
    assert setup.carrier() == {}


async def test_a_run_reaches_an_otlp_http_receiver(
    fast_demo: None, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_EXPORTER_OTLP_HEADERS": "x-team=assistant",
        "OTEL_SERVICE_NAME": "assistant-test",
        "OTEL_BSP_SCHEDULE_DELAY": "60000",  # nothing leaves before the flush: all of it then, in one batch
    }
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    telemetry = setup.configure()
    assert telemetry is not None
    try:
        await ask()
        assert receiver.received.get("/v1/traces") is None  # batched, not sent from the event loop
    finally:
        setup.shutdown()  # what a worker's shutdown does: flush
    assert setup.current() is None

    spans = []
    for body in receiver.received["/v1/traces"]:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
            assert service == "assistant-test"
            for scope in resource_spans.scope_spans:
                spans += scope.spans
    assert len({s.trace_id for s in spans}) == 1
    names = [s.name for s in spans]
    assert names.count("invoke_agent assistant") == 1 and names.count("execute_tool agents") == 1
    assert sum(n.startswith("invoke_agent agent") for n in names) == 2
    assert all(h.get("x-team") == "assistant" for h in receiver.headers_seen)

    metrics = {
        m.name
        for body in receiver.received["/v1/metrics"]
        for rm in ExportMetricsServiceRequest.FromString(body).resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert {
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
        "assistant.runs",
        "assistant.agents",
    } <= metrics
