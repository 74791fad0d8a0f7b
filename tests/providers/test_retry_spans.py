"""Each request sent to the provider is a ``chat`` span of its own: a try refused (429, 5xx) and tried again by the
real SDK adapters has its span with ``error.type``, and the call's usage and cost are on the last one."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from assistant.engine.errors import RateLimited
from assistant.engine.events import Event
from assistant.engine.models.streaming import RetryPolicy
from assistant.telemetry.instruments import Instruments
from assistant.telemetry.setup import Telemetry
from assistant.telemetry.spans import RunFacts, RunTrace
from tests.providers.provider_support import PLAIN, Wire
from tests.providers.test_billing import REQUEST, harness, usages
from tests.providers.wire import Turn, error_reply, sse_reply

QUICK = RetryPolicy(base_delay=0.001, max_delay=0.001)
wire_servers = pytest.mark.parametrize("server", ["openai", "mistral"], indirect=True)
FACTS = RunFacts(run_id="r", conversation_id="1", organisation="demo", category="", level="", model="plain")


def _traced(wire: Wire) -> tuple[RunTrace, InMemorySpanExporter, list[Event], Any]:
    """The harness of the billing tests, its events also heard by a run's trace over an in-memory exporter."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry = Telemetry(
        tracer=provider.get_tracer("t"), instruments=Instruments.create(MeterProvider().get_meter("t"))
    )
    h = harness(wire)
    h.ctx.models = lambda model_id: wire.model(PLAIN, retry=QUICK)
    trace = RunTrace(telemetry, FACTS, h.ctx.catalogue)
    record = h.ctx.emit

    async def emit(event: Event) -> None:
        trace.on_event(event)
        await record(event)

    h.ctx.emit = emit
    return trace, spans, h.events, h


def _times(span: ReadableSpan) -> tuple[int, int]:
    """A finished span's start and end (the SDK types them optional: a span not started or not ended has none)."""
    assert span.start_time is not None and span.end_time is not None
    return span.start_time, span.end_time


@wire_servers
async def test_each_try_is_a_chat_span_of_its_own(wire: Wire) -> None:
    trace, spans, events, h = _traced(wire)
    wire.server.script(
        error_reply(wire.dialect, 429, "Slow down", {"retry-after": "0"}),
        error_reply(wire.dialect, 500, "boom"),
        sse_reply(wire.dialect, "plain", Turn("Made it.")),
    )
    await h.ctx.call_model("plain", REQUEST)
    trace.close()
    assert len(wire.server.requests) == 3
    chats = sorted((s for s in spans.get_finished_spans() if s.name == "chat plain"), key=lambda s: _times(s)[0])
    assert [(s.attributes or {}).get("error.type") for s in chats] == ["rate_limited", "server_error", None]
    assert all(_times(a)[1] <= _times(b)[0] for a, b in itertools.pairwise(chats))  # one after the other
    [usage] = usages(events)
    last = chats[-1].attributes or {}
    assert (last["gen_ai.usage.input_tokens"], last["gen_ai.usage.cost.amount"]) == (
        usage.prompt_tokens,
        usage.cost_eur,
    )
    assert last["gen_ai.response.finish_reasons"] == ("stop",)
    assert last["gen_ai.request.model"] == "plain" and last["gen_ai.response.model"] == "plain"  # as the wire said
    assert not any("gen_ai.usage.input_tokens" in (s.attributes or {}) for s in chats[:-1])
    [root] = [s for s in spans.get_finished_spans() if s.parent is None]
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in chats)


@wire_servers
async def test_a_call_refused_every_time_is_as_many_failed_spans(wire: Wire) -> None:
    trace, spans, events, h = _traced(wire)
    wire.server.script(*(error_reply(wire.dialect, 429, "Too many requests", {"retry-after": "0"}) for _ in range(5)))
    with pytest.raises(RateLimited):
        await h.ctx.call_model("plain", REQUEST)
    trace.close()
    chats = [s for s in spans.get_finished_spans() if s.name == "chat plain"]
    assert len(chats) == len(wire.server.requests) == 5
    assert {(s.attributes or {}).get("error.type") for s in chats} == {"rate_limited"}
    assert usages(events) == []
