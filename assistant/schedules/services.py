"""Scheduled tasks: checked like a chat request, kept in step with beat's entry, executed as runs.

Beat (django-celery-beat's database scheduler) sends ``schedules.execute`` with the task's id on the
task's crontab, in its organisation's time zone; a worker then calls ``start_execution`` and executes
the run with the task's cost cap (``workers.tasks``). "Run now" does the same from the task's page.
"""

from __future__ import annotations

import json
import zoneinfo

from celery.schedules import crontab
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from assistant.engine.errors import RequestRefused
from assistant.engine.policy import LEVELS, Level
from assistant.engine.refusals import Refusal
from assistant.engine.scope import Scope
from assistant.orgs.models import Membership
from assistant.runs import execution, intake
from assistant.runs.models import Conversation
from assistant.runs.start import RunStart

from .models import Execution, ScheduledTask

TASK_NAME = "schedules.execute"
RESOURCE_LABELS = {"web": _lazy("Web"), "code": _lazy("Code")}


def parse_schedule(text: str) -> list[str]:
    """The five crontab fields (minute hour day-of-month month day-of-week); ValueError when invalid."""
    fields = text.split()
    if len(fields) != 5:
        raise ValueError(_("A schedule has five fields: minute hour day-of-month month day-of-week."))
    minute, hour, day_of_month, month, day_of_week = fields
    crontab(minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month, day_of_week=day_of_week)
    return fields


def unavailable_resources(organisation_id: int, resources: list[str] | tuple[str, ...]) -> list[str]:
    """``web`` and ``code`` among ``resources`` when this server does not offer them (as the API checks)."""
    toolbox = execution.toolbox_for(organisation_id)
    return [r for r in ("web", "code") if r in resources and not toolbox.tools_for(Scope.from_resources([r]))]


def ask_of(task: ScheduledTask) -> intake.Ask:
    level: Level | None = task.level if task.level in LEVELS else None
    return intake.Ask(
        text=task.prompt,
        model=task.model,
        level=level,
        resources=tuple(task.resources),
        category=task.category,
        language=task.language,
    )


@transaction.atomic
def save_task(task: ScheduledTask) -> ScheduledTask:
    """Save the task and its beat entry: the crontab in the organisation's time zone, enabled with the task."""
    task.save()
    minute, hour, day_of_month, month, day_of_week = parse_schedule(task.schedule)
    schedule, _ = CrontabSchedule.objects.get_or_create(
        minute=minute,
        hour=hour,
        day_of_month=day_of_month,
        month_of_year=month,
        day_of_week=day_of_week,
        timezone=task.organisation.time_zone,
    )
    entry = task.periodic_task or PeriodicTask(name=f"scheduled task {task.pk}", task=TASK_NAME)
    entry.crontab, entry.interval = schedule, None
    entry.args = json.dumps([task.pk])
    entry.enabled = task.enabled
    entry.description = task.name
    entry.save()
    if task.periodic_task_id != entry.pk:
        task.periodic_task = entry
        task.save(update_fields=["periodic_task"])
    return task


def start_execution(task_id: int, *, now: bool = False) -> RunStart | None:
    """Create the run of one execution in a new conversation of the owner, with the task's cost cap: its start.

    Checked as a chat request is (policy, knowledge bases, the category's budget): a refusal is
    recorded on the execution and nothing runs. A disabled task runs only when asked to ``now``.
    """
    task = ScheduledTask.objects.select_related("organisation", "owner").filter(pk=task_id).first()
    if task is None or not (task.enabled or now):
        return None
    try:
        if not Membership.objects.filter(organisation=task.organisation, user=task.owner).exists():
            raise RequestRefused(Refusal(code="owner_left"))
        with transaction.atomic():
            when = timezone.localtime(timezone.now(), timezone=zoneinfo.ZoneInfo(task.organisation.time_zone))
            title = f"{task.name} — {when:%Y-%m-%d %H:%M}"
            conversation = Conversation.objects.create(
                organisation=task.organisation, user=task.owner, title=title[:200]
            )
            start = intake.create_run(
                task.owner, task.organisation, conversation, ask_of(task), cost_cap_eur=float(task.cost_cap_eur)
            )
            Execution.objects.create(task=task, run=start.run)
    except RequestRefused as e:
        Execution.objects.create(task=task, refused=e.refusal.model_dump_json())  # worded when shown
        return None
    return start
