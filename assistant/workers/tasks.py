"""The Celery tasks: a run, a scheduled task's execution (which beat sends), and an upload's extraction.

The extraction's worker reads the file through Django's storage, so web servers and workers share a
``MEDIA_ROOT`` (or an object store), not a local path.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from celery import Task
from django.utils import timezone

from assistant.knowledge import processing
from assistant.runs import execution, leases
from assistant.runs.start import RunStart
from assistant.schedules import services as schedules
from assistant.telemetry import setup

from .celery import app
from .runner import runner

log = logging.getLogger(__name__)


@app.task(name="runs.execute", bind=True)
def execute(self: Task[Any, Any], run_id: str, cost_cap_eur: float | None = None) -> None:
    # Under the trace context the web process sent with it (``submit``): the run's span is the child of its caller's.
    parent = setup.context_from(_headers(self))
    runner.run(setup.within(parent, execution.execute_stored(uuid.UUID(hex=run_id), cost_cap_eur)))


@app.task(name="schedules.execute", bind=True)
def execute_scheduled_task(self: Task[Any, Any], task_id: int) -> None:
    start = schedules.start_execution(task_id)
    if start is not None:
        parent = setup.context_from(_headers(self))  # beat's, if it sent one; else the run's trace starts here
        runner.run(setup.within(parent, execution.execute_run(start)))


def _headers(task: Task[Any, Any]) -> dict[str, Any]:
    """The trace headers a task's message carried (Celery makes a message's own headers the request's attributes)."""
    return {key: value for key in ("traceparent", "tracestate") if (value := task.request.get(key))}


@app.task(name="knowledge.extract")
def extract_document(document_id: int) -> None:
    try:
        processing.process(document_id)
    except Exception:
        processing.fail([document_id], processing.CRASHED, {"exit": None})
        raise


async def submit(start: RunStart) -> None:
    """Hand a run to whichever worker takes it (its id and cost cap: the worker reads its start from the database,
    ``execution.execute_stored``); one that cannot be queued fails at once, saying so."""
    run_id, cost_cap_eur = start.run.pk, start.cost_cap_eur
    try:
        await asyncio.to_thread(execute.apply_async, (run_id.hex, cost_cap_eur), headers=setup.carrier())
    except Exception:
        log.exception("could not queue run %s", run_id)
        if await sync_to_async(leases.fail)(run_id, leases.NOT_QUEUED, timezone.now(), None):
            await leases.announce_failed([run_id])
