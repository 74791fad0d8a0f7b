"""Mark runs left 'running' by a server that stopped as failed, keeping what they had saved.

What they had saved is kept as the workers' reaper keeps it (``runs.leases.abandon``): steps, the
partial answer (as the assistant's message), the cost of the saved calls and the sources the saved
steps show were read.

In the embedded default only the web server executes runs, so at its start no run can still be
executing: `make run` calls this before serving. Scaled out (``RUNS_EXECUTOR=celery``) workers may be
executing runs while a web server starts: only runs whose lease has expired are failed (as every
worker does on its own). Uploads left processing are failed the same way: all of them in the embedded
default (its pool is in the web server), those older than ``KB_EXTRACT_STALE_SECONDS`` scaled out.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from assistant.engine.causes import Cause
from assistant.knowledge import processing
from assistant.runs import leases

STOPPED = Cause(code="server_stopped")


class Command(BaseCommand):
    help = (
        "Mark runs left running by a stopped server as failed (their saved steps, partial answer, cost and sources "
        "are kept)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        failed = leases.reap() if settings.RUNS_EXECUTOR == "celery" else leases.fail_all_running(STOPPED)
        count = len(failed)
        if count:
            self.stdout.write(f"{count} interrupted run(s) marked as failed.")
        embedded = settings.RUNS_EXECUTOR != "celery"
        documents = processing.fail_stale(None if embedded else settings.KB_EXTRACT_STALE_SECONDS)
        if documents:
            self.stdout.write(f"{documents} interrupted upload(s) marked as failed.")
