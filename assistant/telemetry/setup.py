"""The process's telemetry, set up from the standard ``OTEL_*`` variables, or None.

``configure()`` is called once as a process starts (``assistant.asgi`` for the web server, the ``worker_init``
signal for a Celery worker). With ``OTEL_EXPORTER_OTLP_ENDPOINT`` it builds the official SDK's tracer, meter and
logger providers (for the GenAI content events) with OTLP exporters, ``http/protobuf`` by default or ``grpc``
(``OTEL_EXPORTER_OTLP_PROTOCOL``, or per signal ``OTEL_EXPORTER_OTLP_{TRACES,METRICS,LOGS}_PROTOCOL``); every other
variable is the SDK's own (headers, service name, resource attributes, sampler, ``OTEL_BSP_*``,
``OTEL_METRIC_EXPORT_INTERVAL``, ``OTEL_BLRP_*``). Spans, metrics and events leave in batches from the SDK's own
threads, never from the event loop. ``shutdown()`` flushes them (a worker's shutdown; the SDK's providers also
shut down at the interpreter's exit, which SIGTERM reaches in the web server and in a Celery worker). Without the
endpoint (or with ``OTEL_SDK_DISABLED=true``) nothing is built, nothing is imported from the SDK, and ``current()``
is None: a run then costs one ``is None`` test.
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry import trace as trace_api
from opentelemetry.context import Context

from .content import ContentMode, content_mode
from .instruments import Instruments

if TYPE_CHECKING:
    from opentelemetry._logs import Logger

log = logging.getLogger(__name__)

T = TypeVar("T")
SCOPE = "assistant"
PROTOCOLS = ("http/protobuf", "grpc")


@dataclass(slots=True)
class Telemetry:
    """What a process sends: its tracer, its instruments, its logger (content events) and the content mode."""

    tracer: trace_api.Tracer
    instruments: Instruments
    logger: Logger | None = None
    content: ContentMode = ContentMode.NO_CONTENT
    providers: tuple[Any, ...] = field(default=())
    """The SDK providers to flush and shut down (none when a test hands its own in)."""

    def shutdown(self) -> None:
        for provider in self.providers:
            try:
                provider.shutdown()
            except Exception:  # a collector that is down: the process still exits
                log.exception("could not flush telemetry")


_current: Telemetry | None = None
_lock = threading.Lock()


def current() -> Telemetry | None:
    """This process's telemetry, or None when it exports nothing."""
    return _current


def install(telemetry: Telemetry | None) -> Telemetry | None:
    """Make ``telemetry`` this process's (None: none); returns the one it replaces. ``configure`` calls it; a test
    hands in one over the SDK's in-memory exporters."""
    global _current
    with _lock:
        previous, _current = _current, telemetry
    return previous


def enabled(environ: Mapping[str, str]) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip())


def configure(environ: Mapping[str, str] | None = None) -> Telemetry | None:
    """Set up this process's telemetry from the environment, once (a second call returns the first's)."""
    environ = os.environ if environ is None else environ
    if _current is not None or not enabled(environ):
        return _current
    telemetry = build(environ)
    install(telemetry)
    log.info("telemetry: exporting traces and metrics over OTLP (%s)", _protocol(environ, "TRACES"))
    return telemetry


def build(environ: Mapping[str, str]) -> Telemetry:
    """The SDK's providers, with batching processors and OTLP exporters as the environment says."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "assistant"}))
    tracer_provider = TracerProvider(resource=resource)  # the sampler: OTEL_TRACES_SAMPLER(_ARG)
    tracer_provider.add_span_processor(BatchSpanProcessor(_exporter(environ, "TRACES")))
    reader = PeriodicExportingMetricReader(_exporter(environ, "METRICS"))  # OTEL_METRIC_EXPORT_INTERVAL
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    mode = content_mode(environ)
    logger_provider = None
    if mode.as_events:
        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(_exporter(environ, "LOGS")))
    providers: tuple[Any, ...] = (tracer_provider, meter_provider) + ((logger_provider,) if logger_provider else ())
    return Telemetry(
        tracer=tracer_provider.get_tracer(SCOPE),
        instruments=Instruments.create(meter_provider.get_meter(SCOPE)),
        logger=logger_provider.get_logger(SCOPE) if logger_provider else None,
        content=mode,
        providers=providers,
    )


def _protocol(environ: Mapping[str, str], signal: str) -> str:
    value = environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    value = (value or "http/protobuf").strip()
    if value not in PROTOCOLS:
        log.warning("telemetry: OTLP protocol %r is not supported (%s): http/protobuf used", value, PROTOCOLS)
        return "http/protobuf"
    return value


def _exporter(environ: Mapping[str, str], signal: str) -> Any:
    """The OTLP exporter of one signal; it reads its endpoint, headers, timeout and compression itself."""
    grpc = _protocol(environ, signal) == "grpc"
    if signal == "TRACES":
        if grpc:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

            return GrpcSpans()
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans

        return HttpSpans()
    if signal == "METRICS":
        if grpc:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics

            return GrpcMetrics()
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics

        return HttpMetrics()
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs

        return GrpcLogs()
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs

    return HttpLogs()


def shutdown() -> None:
    """Flush and shut down this process's telemetry (a Celery worker's shutdown)."""
    telemetry = install(None)
    if telemetry is not None:
        telemetry.shutdown()


def count_refusal(code: str) -> None:
    """A request refused before it started, by its refusal's code."""
    if _current is not None:
        _current.instruments.refusals.add(1, {"assistant.refusal.code": code})


def count_connection(change: int) -> None:
    """A live chat connection opened (1) or closed (-1)."""
    if _current is not None:
        _current.instruments.connections.add(change)


# Carrying a run's trace context to where it executes ------------------------------------------------------------


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (``traceparent``), to hand a run to another process; empty when
    this process exports nothing."""
    headers: dict[str, str] = {}
    if _current is not None:
        propagate.inject(headers)
    return headers


def context_from(headers: Mapping[str, Any]) -> Context | None:
    """The trace context ``carrier`` wrote (None: none, or this process exports nothing)."""
    if _current is None:
        return None
    found = {k: str(v) for k in ("traceparent", "tracestate") if (v := headers.get(k))}
    return propagate.extract(found) if found else None


def carry_into(target: contextvars.Context) -> None:
    """Put the current trace context into ``target``, the fresh context a run's task starts with in this process."""
    if _current is not None:
        target.run(otel_context.attach, otel_context.get_current())


async def within(parent: Context | None, work: Awaitable[T]) -> T:
    """Await ``work`` under ``parent`` (``context_from``'s): a run's span is then its child."""
    if parent is None:
        return await work
    token = otel_context.attach(parent)
    try:
        return await work
    finally:
        otel_context.detach(token)
