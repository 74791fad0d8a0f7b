from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from assistant.runs.start import RunStart


class WorkersConfig(AppConfig):
    name = "assistant.workers"
    verbose_name = "Run execution"

    def ready(self) -> None:
        # RUNS_EXECUTOR=celery hands runs to the workers (``runs`` does not import this app).
        from assistant.knowledge import processing
        from assistant.runs import execution

        execution.register_executor("celery", _submit)
        processing.register_queue(_queue_extraction)


async def _submit(start: RunStart) -> None:
    # Imported when a run is handed over: the Celery app reads the settings then (tests change them).
    from .tasks import submit

    await submit(start)


def _queue_extraction(document_id: int) -> None:
    from .tasks import extract_document

    extract_document.apply_async((document_id,))
