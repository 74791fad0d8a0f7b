"""Mark runs left 'running' by a server that stopped as failed, keeping what they had saved.

In the embedded default only the web server executes runs, so at its start no run can still be
executing: `make run` calls this before serving. Scaled out (``RUNS_EXECUTOR=celery``) workers may be
executing runs while a web server starts: only runs whose lease has expired are failed (as every
worker does on its own).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from assistant.chat.models import Run
from assistant.workers import leases

MESSAGE = "The server stopped while this answer was being written; what it had written so far is kept."


class Command(BaseCommand):
    help = "Mark runs left running by a stopped server as failed (their saved steps and partial answer are kept)."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.RUNS_EXECUTOR == "celery":
            count = len(leases.reap())
        else:
            count = Run.objects.filter(status="running").update(status="error", error=MESSAGE, finished=timezone.now())
        if count:
            self.stdout.write(f"{count} interrupted run(s) marked as failed.")
