"""The wire: with ``OTEL_EXPORTER_OTLP_ENDPOINT``, a run's spans and the metrics reach an OTLP/HTTP receiver (one
this test starts) through the SDK's exporters, as the standard variables configure them; without it nothing is set up."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from assistant.telemetry import setup
from tests.otlp_receiver import Receiver, metric_names, receiving, spans_of
from tests.telemetry.telemetry_support import ask

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as server:
        yield server


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

    found = spans_of(receiver)
    assert {service for service, _ in found} == {"assistant-test"}
    spans = [span for _, span in found]
    assert len({s.trace_id for s in spans}) == 1
    names = [s.name for s in spans]
    assert names.count("invoke_agent assistant") == 1 and names.count("execute_tool agents") == 1
    assert sum(n.startswith("invoke_agent agent") for n in names) == 2
    assert all(h.get("x-team") == "assistant" for h in receiver.headers_seen)
    metrics = metric_names(receiver)
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "assistant.runs", "assistant.agents"} <= (
        metrics
    )
