"""A run on a real Celery worker, traced: the web process's trace context goes with the task, the worker exports the
run's spans and metrics over OTLP/HTTP to a receiver this test starts, and flushes them when SIGTERM stops it; a
scheduled task's execution, sent as beat sends it (no caller), is a trace of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from opentelemetry import trace as trace_api
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from assistant.engine.events import UsageEvent
from assistant.orgs.models import Organisation
from assistant.runs.models import Conversation, Run
from assistant.runs.steps import events_of
from assistant.schedules import services as schedules
from assistant.schedules.models import Execution, ScheduledTask
from assistant.telemetry import setup
from assistant.telemetry.instruments import Instruments
from assistant.workers.celery import app
from tests.chat.chat_support import ASK, signed_in
from tests.otlp_receiver import Receiver, attributes, metric_names, receiving, spans_of
from tests.scale.conftest import Processes
from tests.waiting import until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as server:
        yield server


@pytest.fixture
def web_telemetry() -> Iterator[setup.Telemetry]:
    """This process (the web server) traces: it sends its context with the runs it hands over."""
    telemetry = setup.Telemetry(
        tracer=TracerProvider().get_tracer("web"), instruments=Instruments.create(MeterProvider().get_meter("web"))
    )
    previous = setup.install(telemetry)
    yield telemetry
    setup.install(previous)


async def test_a_run_on_a_worker_is_one_trace_under_its_callers_span_flushed_on_sigterm(
    scaled: dict[str, str],
    demo: None,
    processes: Processes,
    receiver: Receiver,
    web_telemetry: setup.Telemetry,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The shared workers would take the run too: only the traced one listens now (the next test starts them again).
    for process in processes.started:
        await asyncio.to_thread(process.stop)
    environ = {
        **scaled,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": "assistant-worker",
        # Nothing leaves before the worker stops: what arrives is what its shutdown flushed.
        "OTEL_BSP_SCHEDULE_DELAY": "600000",
        "OTEL_METRIC_EXPORT_INTERVAL": "600000",
    }
    traced = Processes(environ, tmp_path_factory.mktemp("traced"))
    try:
        worker = await asyncio.to_thread(traced.worker, "traced")
        client, _ = await signed_in()
        user = await get_user_model().objects.aget(username="demo")
        org = await Organisation.objects.aget(slug="demo")
        conversation = await Conversation.objects.acreate(organisation=org, user=user, title="Traced")
        caller = web_telemetry.tracer.start_span("POST /c/{id}/send")
        with trace_api.use_span(caller, end_on_exit=True):
            response = await client.post(f"/c/{conversation.pk}/send", ASK, headers={"HX-Request": "true"})
        assert response.status_code == 200
        run = await Run.objects.aget(conversation=conversation)

        def log() -> str:
            return "the worker's run to end; its log:\n" + worker.output()[-3000:]

        await until(lambda: Run.objects.exclude(status="running").filter(pk=run.pk).aexists(), log, seconds=120)
        run = await Run.objects.aget(pk=run.pk)
        assert run.status == "ok", run.error
        # A scheduled task's execution, sent as beat sends it: no caller's context comes with it.
        task = ScheduledTask(
            organisation=org, owner=user, name="Traced watch", prompt=ASK["text"], model="demo-large",
            level="approfondi", resources=ASK["resources"], cost_cap_eur=Decimal("1"), schedule="0 7 * * 1-5",
        )  # fmt: skip
        await sync_to_async(schedules.save_task)(task)
        await sync_to_async(app.send_task)("schedules.execute", args=[task.pk])
        executed = Execution.objects.filter(task=task, run__isnull=False).exclude(run__status="running")
        await until(executed.aexists, log, seconds=120)
        scheduled = (await Execution.objects.select_related("run").aget(task=task)).run
        assert scheduled is not None and scheduled.status == "ok", scheduled and scheduled.error
        assert receiver.received.get("/v1/traces") is None  # batched: nothing left before the shutdown
        await asyncio.to_thread(worker.stop)  # SIGTERM: Celery's warm shutdown
        assert worker.popen.returncode == 0, worker.output()[-3000:]
    finally:
        await asyncio.to_thread(traced.stop_all)

    found = spans_of(receiver)
    assert {service for service, _ in found} == {"assistant-worker"}
    context = caller.get_span_context()
    trace_id = context.trace_id.to_bytes(16, "big")
    # The scheduled task's run: a trace of its own, rooted in its run's span, with its agents and calls under it.
    task_spans = [span for _, span in found if span.trace_id != trace_id]
    [task_root] = [s for s in task_spans if not s.parent_span_id]
    assert task_root.name == "invoke_agent assistant"
    assert attributes(task_root)["gen_ai.conversation.id"] == str(scheduled.conversation_id)
    assert attributes(task_root)["assistant.run.cost_eur"] == scheduled.cost_eur
    assert sum(s.name.startswith("invoke_agent agent") for s in task_spans) == 2
    spans = [span for _, span in found if span.trace_id == trace_id]  # the caller's trace
    [root] = [s for s in spans if s.name == "invoke_agent assistant"]
    assert root.parent_span_id == context.span_id.to_bytes(8, "big")
    assert attributes(root)["assistant.run.status"] == "ok"
    assert attributes(root)["assistant.run.cost_eur"] == run.cost_eur
    usage = [
        e for e in await sync_to_async(lambda: events_of(run.steps.order_by("seq")))() if isinstance(e, UsageEvent)
    ]
    chats = [attributes(s) for s in spans if s.name.startswith("chat ")]

    def key(a: dict[str, Any]) -> tuple[Any, ...]:
        return (a["gen_ai.request.model"], a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"],
                a["gen_ai.usage.cost.amount"])  # fmt: skip

    assert sorted(map(key, chats)) == sorted((e.model, e.prompt_tokens, e.completion_tokens, e.cost_eur) for e in usage)
    assert sum(s.name.startswith("invoke_agent agent") for s in spans) == 2
    assert {"gen_ai.client.token.usage", "assistant.runs", "assistant.agents"} <= metric_names(receiver)
