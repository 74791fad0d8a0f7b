"""The plain chat pages: conversations, a composer, each run's answer and delegations, Stop."""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from assistant.engine.errors import RequestRefused
from assistant.engine.policy import LEVELS, Level
from assistant.knowledge.models import KnowledgeBase
from assistant.orgs.models import Organisation
from assistant.orgs.services import organisation_of, policy_for

from . import providers, runs
from .models import Conversation, Run
from .presenters import run_view

LEVEL_LABELS: dict[str, str] = {"rapide": "Rapide", "standard": "Standard", "approfondi": "Approfondi", "maximal": "Maximal"}


def _composer(org: Organisation, values: dict[str, Any] | None = None) -> dict[str, Any]:
    catalogue = providers.catalogue()
    allowed = [catalogue[m] for m in policy_for(org).allowed_ids(catalogue)]
    kbs = list(KnowledgeBase.objects.filter(organisation=org))
    defaults = {
        "text": "",
        "model": allowed[0].id if allowed else "",
        "level": "approfondi",
        "resources": [f"kb:{kb.slug}" for kb in kbs] + ["agents"],
    }
    return {
        "models": allowed,
        "levels": [(lv, LEVEL_LABELS[lv]) for lv in LEVELS],
        "knowledge_bases": kbs,
        "values": {**defaults, **(values or {})},
    }


def _page(request: HttpRequest, conversation: Conversation | None, values: dict[str, Any] | None = None, error: str = "") -> dict[str, Any]:
    org = organisation_of(request.user)
    context: dict[str, Any] = {
        "conversations": Conversation.objects.filter(organisation=org, user=request.user)[:50],
        "conversation": conversation,
        "composer": _composer(org, values),
        "error": error,
        "items": [],
        "running": False,
    }
    if conversation is not None:
        runs_by_id = {r.pk: r for r in conversation.runs.prefetch_related("steps")}
        for message in conversation.messages.all():
            if message.role == "user":
                run = runs_by_id.get(message.run_id) if message.run_id else None
                context["items"].append({"question": message, "run": run_view(run) if run else None})
        context["running"] = any(r.is_running for r in runs_by_id.values())
    return context


def _conversation(request: HttpRequest, pk: int) -> Conversation:
    # Another user's or organisation's conversation does not exist for this user.
    org = organisation_of(request.user)
    return get_object_or_404(Conversation, pk=pk, organisation=org, user=request.user)


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "chat/page.html", _page(request, None))


@login_required
@require_GET
def conversation(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "chat/page.html", _page(request, _conversation(request, pk)))


def _ask_from(post: dict[str, Any], resources: list[str]) -> tuple[runs.Ask, dict[str, Any]]:
    text = str(post.get("text", "")).strip()
    level_raw = str(post.get("level", ""))
    level: Level | None = level_raw if level_raw in LEVELS else None  # type: ignore[assignment]
    values = {"text": text, "model": str(post.get("model", "")), "level": level_raw, "resources": resources}
    return runs.Ask(text=text, model=values["model"], level=level, resources=tuple(resources)), values


def _create(request: HttpRequest, pk: int | None) -> tuple[Run | None, HttpResponse | None]:
    conv = _conversation(request, pk) if pk is not None else None
    ask, values = _ask_from(request.POST.dict(), request.POST.getlist("resources"))
    org = organisation_of(request.user)
    try:
        if not ask.text:
            raise RequestRefused("Write a message first.")
        run = runs.create_run(request.user, org, conv, ask)  # type: ignore[arg-type]
    except RequestRefused as e:
        # The typed message is kept: the page comes back with it and the reason in plain words.
        return None, render(request, "chat/page.html", _page(request, conv, values, str(e)), status=400)
    return run, None


@login_required
@require_POST
async def send(request: HttpRequest, pk: int | None = None) -> HttpResponseBase:
    run, refused = await sync_to_async(_create)(request, pk)
    if refused is not None:
        return refused
    assert run is not None
    runs.launch(run.pk)
    return redirect("conversation", pk=run.conversation_id)


@login_required
@require_POST
async def stop(request: HttpRequest, run_id: uuid.UUID) -> HttpResponseBase:
    user = await request.auser()
    org = await sync_to_async(organisation_of)(user)
    run = await Run.objects.filter(pk=run_id, organisation=org, user=user).afirst()
    if run is None:
        return HttpResponse("Not found", status=404)
    await runs.request_stop(run.pk)
    return redirect("conversation", pk=run.conversation_id)
