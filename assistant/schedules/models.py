"""A scheduled task: a saved prompt with its model, level, resources, category and cost cap; and its executions."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django_celery_beat.models import PeriodicTask
from pydantic import ValidationError

from assistant.engine.refusals import Refusal
from assistant.orgs.models import Organisation
from assistant.runs import wording
from assistant.runs.models import Run


class ScheduledTask(models.Model):
    """Its owner's assistant answers ``prompt`` on ``schedule``, each time in a new conversation of the owner."""

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="scheduled_tasks")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scheduled_tasks")
    name = models.CharField(max_length=100)
    prompt = models.TextField()
    model = models.CharField(max_length=100)
    level = models.CharField(max_length=20, blank=True)
    resources = models.JSONField(default=list)
    category = models.CharField(max_length=100, blank=True, help_text="A task category's slug; empty for the default")
    cost_cap_eur = models.DecimalField(
        max_digits=8, decimal_places=4, validators=[MinValueValidator(Decimal("0.0001"))]
    )
    schedule = models.CharField(max_length=100, help_text="minute hour day-of-month month day-of-week")
    enabled = models.BooleanField(default=True)
    language = models.CharField(
        max_length=10,
        blank=True,
        help_text="Its owner's interface language when it was last saved: its runs' language, as a chat message's is",
    )
    # Beat's entry (django-celery-beat), kept in step with the schedule by ``services.save_task``.
    periodic_task = models.OneToOneField(
        PeriodicTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name


class Execution(models.Model):
    """One execution of a scheduled task: its run, or why it did not start."""

    task = models.ForeignKey(ScheduledTask, on_delete=models.CASCADE, related_name="executions")
    run = models.OneToOneField(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="execution")
    refused = models.TextField(blank=True)
    """Why it did not start: the refusal as JSON (``engine.refusals.Refusal``), worded when shown; an execution
    refused before refusals were data has its English sentence."""
    started = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-started", "-pk"]

    @property
    def refusal(self) -> Refusal | None:
        if not self.refused.startswith("{"):
            return None
        try:
            return Refusal.model_validate_json(self.refused)
        except ValidationError:
            return None

    @property
    def refused_text(self) -> str:
        """Why it did not start, in the reader's language."""
        refusal = self.refusal
        return wording.refusal_text(refusal) if refusal is not None else self.refused
