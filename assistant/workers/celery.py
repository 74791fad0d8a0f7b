"""The Celery app: ``celery -A assistant.workers.celery worker`` executes runs, ``… beat`` fires the
scheduled tasks whose schedule is in the database (django-celery-beat).

Configured from the Django settings (docs/SCALING.md): the broker is ``REDIS_URL`` (or
``CELERY_BROKER_URL``); each worker is one process whose ``RUNS_WORKER_CONCURRENCY`` task threads hand
their runs to one event loop (``runner``), where they execute concurrently.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_ready, worker_shutdown, worker_shutting_down

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "assistant.settings")

app = Celery("assistant")


def configure() -> None:
    """Read the Django settings into the app (again, when a test changes them before any task is sent)."""
    from django.conf import settings

    broker: str = settings.CELERY_BROKER_URL
    redis = broker.startswith(("redis://", "rediss://", "unix://"))
    app.conf.update(
        broker_url=broker,
        # Several deployments (or test runs) can share one Redis: every key starts with the prefix.
        broker_transport_options={"global_keyprefix": f"{settings.REDIS_PREFIX}:celery:"} if redis else {},
        broker_connection_retry_on_startup=True,
        task_ignore_result=True,
        # Acknowledged when it starts: a run is never executed twice. A killed worker's runs are failed
        # by the reaper (their lease expires), not delivered again.
        task_acks_late=False,
        worker_pool="threads",
        worker_concurrency=settings.RUNS_WORKER_CONCURRENCY,
        worker_prefetch_multiplier=1,  # a busy worker leaves the next runs to the others
        worker_hijack_root_logger=False,
        beat_scheduler="django_celery_beat.schedulers:DatabaseScheduler",
        timezone=settings.TIME_ZONE,
        include=["assistant.workers.tasks"],
    )
    # Connections already pooled were opened to the broker read before: drop them, so a changed broker
    # is the one used (a test that sent a task eagerly leaves a pool to the default broker behind).
    pooled: Any = app
    if pooled._pool is not None:
        pooled._pool.force_close_all()
        pooled._pool = None
        pooled.amqp._producer_pool = None


configure()


@worker_init.connect
def _start_telemetry(**kwargs: Any) -> None:
    # With OTEL_EXPORTER_OTLP_ENDPOINT, the worker's runs export their spans and metrics (docs/OBSERVABILITY.md).
    from assistant.telemetry import setup

    setup.configure()


@worker_shutdown.connect
def _flush_telemetry(**kwargs: Any) -> None:
    # After the runs have stopped (warm shutdown, SIGTERM): what is batched leaves before the process exits.
    from assistant.telemetry import setup

    setup.shutdown()


@worker_ready.connect
def _start_runner(**kwargs: Any) -> None:
    # The event loop starts with the worker, so that it reaps the runs of dead workers from the start.
    from assistant.server.heap import freeze_startup

    from .runner import runner

    freeze_startup()  # Django, the Celery app and its tasks are loaded: what they made lives as long as the worker
    runner.start()


@worker_shutting_down.connect
def _stop_runs(**kwargs: Any) -> None:
    # Warm shutdown waits for the tasks, that is for the runs: they stop as Stop does, at once, keeping what they had.
    from .runner import runner

    runner.stop_runs()
