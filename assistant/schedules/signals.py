"""A deleted scheduled task takes its beat entry with it (also when deleted in bulk from the admin)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete
from django.dispatch import receiver
from django_celery_beat.models import PeriodicTask

from .models import ScheduledTask


@receiver(post_delete, sender=ScheduledTask)
def _delete_beat_entry(sender: type[ScheduledTask], instance: ScheduledTask, **kwargs: Any) -> None:
    if instance.periodic_task_id is not None:
        PeriodicTask.objects.filter(pk=instance.periodic_task_id).delete()
