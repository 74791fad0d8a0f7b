"""What the telemetry tests share: a process's telemetry over the SDK's in-memory exporters, and a delegated run
through the API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx2
from asgiref.sync import sync_to_async
from django.core.management import call_command
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.telemetry import setup
from assistant.telemetry.content import ContentMode
from assistant.telemetry.instruments import Instruments
from tests.asgi_app import asgi_transport

QUESTION = "Bimbamjob: invoicing 2024, payment follow-up, commercial relationship. Conclude on the risk."
DELEGATING = ["kb:factures", "kb:comptes-rendus", "agents"]


@dataclass
class Exported:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    logs: InMemoryLogRecordExporter
    telemetry: setup.Telemetry

    def metric_points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


def exported_with(mode: ContentMode) -> Exported:
    spans, metrics, logs = InMemorySpanExporter(), InMemoryMetricReader(), InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]  # OpenTelemetry's SDK leaves this constructor unannotated
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[metrics])
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    telemetry = setup.Telemetry(
        tracer=tracer_provider.get_tracer("test"),
        instruments=Instruments.create(meter_provider.get_meter("test")),
        logger=logger_provider.get_logger("test"),
        content=mode,
    )
    return Exported(spans, metrics, logs, telemetry)


async def ask(body: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> httpx2.Response:
    """The question to the API on the application itself, delegating, with a new key of the demo organisation."""

    await sync_to_async(call_command)("load_demo", verbosity=0)
    org = await Organisation.objects.aget(slug="demo")
    _, secret = await sync_to_async(keys.create_key)(org, "telemetry")
    async with httpx2.AsyncClient(
        transport=asgi_transport(),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {secret}", **(headers or {})},
        timeout=60,
    ) as client:
        sent = {
            "model": "demo-large",
            "messages": [{"role": "user", "content": QUESTION}],
            "tools_enabled": DELEGATING,
            **(body or {}),
        }
        response = await client.post("/v1/chat/completions", json=sent)
    assert response.status_code == 200, response.text
    return response
