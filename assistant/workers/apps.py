from __future__ import annotations

import uuid

from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "assistant.workers"
    verbose_name = "Run execution"

    def ready(self) -> None:
        # RUNS_EXECUTOR=celery hands runs to the workers (``runs`` does not import this app).
        from assistant.runs import execution

        execution.register_executor("celery", _submit)


async def _submit(run_id: uuid.UUID, cost_cap_eur: float | None) -> None:
    # Imported when a run is handed over: the Celery app reads the settings then (tests change them).
    from .tasks import submit

    await submit(run_id, cost_cap_eur)
