"""The owner's scheduled tasks: list, create, edit, delete, run now, and each task's executions."""

from __future__ import annotations

import zoneinfo

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect
from django.shortcuts import render as django_render
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from assistant.orgs.http import AuthenticatedHttpRequest
from assistant.orgs.services import organisation_of
from assistant.runs import execution, groups

from . import services
from .forms import ScheduledTaskForm
from .models import ScheduledTask
from .wording import schedule_words

EXECUTIONS_SHOWN = 20


def render(
    request: AuthenticatedHttpRequest, template: str, context: dict[str, object], status: int = 200
) -> HttpResponse:
    """The page with its times in the organisation's time zone, as its conversations show them."""
    zone = organisation_of(request.user).time_zone
    with timezone.override(zoneinfo.ZoneInfo(zone)):
        return django_render(request, template, {**context, "time_zone": zone}, status=status)


def _task(request: AuthenticatedHttpRequest, pk: int) -> ScheduledTask:
    # Another user's task, or one of another organisation, does not exist for this user.
    return get_object_or_404(ScheduledTask, pk=pk, organisation=organisation_of(request.user), owner=request.user)


def _context(
    request: AuthenticatedHttpRequest, form: ScheduledTaskForm, task: ScheduledTask | None
) -> dict[str, object]:
    executions = list(task.executions.select_related("run", "run__conversation")[:EXECUTIONS_SHOWN]) if task else []
    return {
        "form": form,
        "task": task,
        "executions": executions,
        "scheduled": settings.RUNS_EXECUTOR == "celery",
    }


@login_required
@require_GET
def task_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = organisation_of(request.user)
    tasks = ScheduledTask.objects.filter(organisation=org, owner=request.user).prefetch_related(
        "executions__run__conversation"
    )
    return render(
        request,
        "schedules/list.html",
        {
            "tasks": [(t, next(iter(t.executions.all()), None), schedule_words(t.schedule)) for t in tasks],
            "scheduled": settings.RUNS_EXECUTOR == "celery",
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def task_edit(request: AuthenticatedHttpRequest, pk: int | None = None) -> HttpResponse:
    org = organisation_of(request.user)
    task = _task(request, pk) if pk is not None else ScheduledTask(organisation=org, owner=request.user)
    form = ScheduledTaskForm(request.POST or None, instance=task, organisation=org)
    if request.method == "POST" and form.is_valid():
        task = form.save(commit=False)
        task.language = translation.get_language() or ""  # the page's, as a chat message takes it
        task = services.save_task(task)
        messages.success(request, _("The scheduled task is saved."))
        return redirect("schedule", pk=task.pk)
    return render(
        request,
        "schedules/task.html",
        _context(request, form, task if task.pk else None),
        status=422 if form.errors else 200,
    )


@login_required
@require_POST
def task_delete(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    task = _task(request, pk)
    task.delete()
    messages.success(request, _("The scheduled task “%(name)s” is deleted.") % {"name": task.name})
    return redirect("schedules")


@login_required
@require_POST
async def task_run_now(request: AuthenticatedHttpRequest, pk: int) -> HttpResponseBase:
    task = await sync_to_async(_task)(request, pk)
    started = await sync_to_async(services.start_execution)(task.pk, now=True)
    if started is None:
        await sync_to_async(messages.error)(request, _("The task could not start; the reason is in its executions."))
        return redirect("schedule", pk=task.pk)
    await groups.announce_started(started.run)
    execution.launch(started)
    return redirect("conversation", pk=started.run.conversation_id)
