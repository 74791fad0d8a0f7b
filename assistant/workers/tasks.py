"""The Celery tasks: a run, a scheduled task's execution (which beat sends), and an upload's extraction.

The extraction's worker reads the file through Django's storage, so web servers and workers share a
``MEDIA_ROOT`` (or an object store), not a local path.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from asgiref.sync import sync_to_async
from django.utils import timezone

from assistant.knowledge import processing
from assistant.runs import execution, leases
from assistant.runs.start import RunStart
from assistant.schedules import services as schedules

from .celery import app
from .runner import runner

log = logging.getLogger(__name__)


@app.task(name="runs.execute")
def execute(run_id: str, cost_cap_eur: float | None = None) -> None:
    runner.run(execution.execute_stored(uuid.UUID(hex=run_id), cost_cap_eur))


@app.task(name="schedules.execute")
def execute_scheduled_task(task_id: int) -> None:
    start = schedules.start_execution(task_id)
    if start is not None:
        runner.run(execution.execute_run(start))


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
        await asyncio.to_thread(execute.apply_async, (run_id.hex, cost_cap_eur))
    except Exception:
        log.exception("could not queue run %s", run_id)
        if await sync_to_async(leases.fail)(run_id, leases.NOT_QUEUED, timezone.now(), None):
            await leases.announce_failed([run_id])
