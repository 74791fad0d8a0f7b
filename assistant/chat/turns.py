"""A conversation's turns beyond sending: edit and resend, regenerate, the queue, search, export.

Edit and Regenerate replace the conversation's last turn with a new run (``intake.create_run(replaces=...)``): the old
run is superseded (``Run.replaced_by``), no longer sent to the model, kept for its cost and shown as a previous
version of the turn. Only the last turn can be replaced, and only once its run has ended.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.text import slugify
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from assistant.engine.errors import RequestRefused
from assistant.engine.policy import LEVELS
from assistant.orgs.http import AuthenticatedHttpRequest, attachment_response
from assistant.orgs.services import organisation_of
from assistant.runs import execution, groups, intake, wording
from assistant.runs.models import Conversation, Message, Run, Step
from assistant.runs.start import RunStart
from assistant.runs.steps import events_of

from . import search as conversation_search
from .agent_views import agents_of
from .htmx import REFUSED
from .names import base_names, named_source
from .templatetags.chat import action_text
from .views import _conversation, _field


def _last_turn(conv: Conversation) -> tuple[Message, Run] | None:
    question = (
        Message.objects.filter(conversation=conv, role="user", queued=False, run__replaced_by__isnull=True)
        .select_related("run")
        .order_by("-pk")
        .first()
    )
    if question is None or question.run is None:
        return None
    return question, question.run


def _refused(request: AuthenticatedHttpRequest, conv: Conversation, error: str) -> HttpResponse:
    """A refused edit or regeneration: the reason next to the turn's buttons (422), the page unchanged."""
    return render(request, "chat/_turn_error.html", {"error": error}, status=REFUSED)


def _replace(request: AuthenticatedHttpRequest, pk: int, run_id: Any, text: str | None) -> tuple[RunStart | None, Any]:
    conv = _conversation(request, pk)
    org = organisation_of(request.user)
    last = _last_turn(conv)
    if last is None or last[1].pk != run_id:
        return None, _refused(request, conv, _("Only the conversation's last turn can be edited or regenerated."))
    question, old = last
    if old.is_running:
        return None, _refused(request, conv, _("Wait for this answer to end (or stop it) before replacing it."))
    level = old.level if old.level in LEVELS else None
    ask = intake.Ask(
        text=question.content if text is None else text,
        model=old.model,
        level=level,
        resources=tuple(old.resources),
        category=old.category,
        language=translation.get_language() or "",
    )
    try:
        return intake.create_run(request.user, org, conv, ask, replaces=old), None
    except intake.Busy:
        return None, _refused(request, conv, _("Another answer of this conversation is being written; try again then."))
    except RequestRefused as e:
        return None, _refused(request, conv, wording.refusal_text(e.refusal))


async def _replaced(request: AuthenticatedHttpRequest, pk: int, run_id: Any, text: str | None) -> HttpResponseBase:
    start, refused = await sync_to_async(_replace)(request, pk, run_id, text)
    if refused is not None:
        return refused  # type: ignore[no-any-return]  # sync_to_async loses _replace's return type
    assert start is not None
    await groups.announce_started(start.run)
    execution.launch(start)
    if request.htmx:
        return HttpResponseClientRedirect(reverse("conversation", args=[pk]))
    return redirect("conversation", pk=pk)


@login_required
@require_POST
async def edit(request: AuthenticatedHttpRequest, pk: int, run_id: Any) -> HttpResponseBase:
    """The last user message, edited and sent again with the same settings: its answer is replaced."""
    return await _replaced(request, pk, run_id, _field(request.POST.dict(), "text").strip())


@login_required
@require_POST
async def regenerate(request: AuthenticatedHttpRequest, pk: int, run_id: Any) -> HttpResponseBase:
    """The last answer written again, same message, same settings."""
    return await _replaced(request, pk, run_id, None)


@login_required
@require_POST
def queued_remove(request: AuthenticatedHttpRequest, pk: int, message_id: int) -> HttpResponse:
    """A queued message taken out of the queue before it is sent."""
    conv = _conversation(request, pk)
    Message.objects.filter(conversation=conv, pk=message_id, queued=True).delete()
    conversation_search.index(conv.pk)
    if request.htmx:
        return HttpResponse("")
    return redirect("conversation", pk=conv.pk)


@login_required
@require_GET
def search(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The owner's conversations matching the sidebar's search box."""
    query = _field(request.GET.dict(), "q").strip()[:200]
    org = organisation_of(request.user)
    results = conversation_search.search(org.pk, request.user.pk, query) if query else []
    context = {"query": query, "results": results}
    if request.htmx:
        return render(request, "chat/_search_results.html", context)
    return render(request, "chat/search.html", context)


# Export ---------------------------------------------------------------------------------------------------------


def export_data(conv: Conversation) -> dict[str, Any]:
    """A conversation as its export says it: each turn (latest versions) with its answer, delegations and their
    whole reports, sources, status and cost; previous versions listed under their turn."""
    # The runs without what an export never shows (an API run's prompt, its sampling and tools), their steps in one
    # query (a long conversation has hundreds of runs).
    runs = {r.pk: r for r in conv.runs.defer("prompt", "sampling", "client_tools", "delegation_answer")}
    steps: dict[Any, list[Step]] = defaultdict(list)
    for step in Step.objects.filter(run__conversation=conv).order_by("run_id", "seq"):
        steps[step.run_id].append(step)
    names = base_names(conv.organisation_id)
    questions = {m.run_id: m for m in conv.messages.filter(role="user", queued=False) if m.run_id}

    def turn(run: Run) -> dict[str, Any]:
        q = questions.get(run.pk)
        return {
            "question": q.content if q else "",
            "asked": q.created.isoformat() if q else None,
            "model": run.model,
            "level": run.level,
            "resources": list(run.resources),
            "resources_text": [wording.resource_text(r, names) for r in run.resources],
            "category": run.category,
            "status": run.status,
            "status_text": wording.status_text(run.status),
            "error": run.error,
            "answer": run.answer,
            "rounds": run.rounds,
            "cost_eur": run.cost_eur,
            "usage": run.usage,
            "sources": list(run.sources),
            "delegations": [
                {
                    "instruction": a.instruction,
                    "model": a.model,
                    "resources": a.resources,
                    "status": a.status,
                    "status_text": wording.agent_status_text(a.status, a.cause),
                    "reason": wording.cause_text(a.cause) if a.cause is not None else "",
                    "rounds": a.rounds,
                    "seconds": a.seconds,
                    "cost_eur": a.cost_eur,
                    "actions": [action_text(x) for x in a.actions],
                    "report": a.report,
                }
                for a in agents_of(events_of(steps[run.pk]), base_names=names)
            ],
        }

    # Each turn's previous versions, gathered in one pass (a long conversation has hundreds of runs).
    replaced: dict[Any, list[Run]] = defaultdict(list)
    for v in runs.values():
        if v.replaced_by_id is not None:
            replaced[v.replaced_by_id].append(v)
    turns = []
    for run in runs.values():
        if run.superseded or run.pk not in questions:
            continue
        turns.append({**turn(run), "previous_versions": [turn(v) for v in replaced[run.pk]]})
    return {
        "title": conv.title,
        "created": conv.created.isoformat(),
        "turns": turns,
        "queued": [m.content for m in conv.messages.filter(queued=True)],
        "cost_eur": sum(r.cost_eur for r in runs.values()),
    }


def export_markdown(data: dict[str, Any], names: Mapping[str, str]) -> str:
    """The export as a person reads it: resources, statuses and sources' bases in words (``names``: the bases'
    names by slug), in the reader's language; the JSON export keeps the codes and ids beside the words."""
    out = [f"# {data['title']}", ""]
    for i, t in enumerate(data["turns"], 1):
        out += [f"## {i}. {t['question']}", ""]
        out.append(
            f"*{t['model']}, {t['level'] or '-'}, {', '.join(t['resources_text']) or '-'}; "
            f"{t['status_text']}; {t['cost_eur']:.4f} EUR*"
        )
        out.append("")
        for d in t["delegations"]:
            out += [
                f"### {_('Delegation')}: {d['instruction']}",
                "",
                f"*{d['model']}, {d['status_text']}, "
                + ngettext("%(n)s round", "%(n)s rounds", d["rounds"]) % {"n": d["rounds"]}
                + f", {d['cost_eur']:.4f} EUR*",
                "",
            ]
            out += [f"- {a}" for a in d["actions"]]
            out += ["", d["report"], ""]
        out += [f"### {_('Answer')}", "", t["answer"] or "—", ""]
        if t["error"]:
            out += [f"> {t['error']}", ""]
        if t["sources"]:
            out += [f"### {_('Sources')}", ""]
            out += [
                f"- {s['title']} ({s.get('id', '')}{', ' + s['where'] if s['where'] else ''})"
                + (f" — {_('a page of the demo web, fictional')}" if s.get("demo_web") else "")
                for s in (named_source(source, names) for source in t["sources"])
            ]
            out.append("")
        for v in t["previous_versions"]:
            out += [f"### {_('Previous version')}", "", f"> {v['question']}", "", v["answer"] or "—", ""]
    out.append(f"{_('Total cost')}: {data['cost_eur']:.4f} EUR")
    return "\n".join(out) + "\n"


@login_required
@require_GET
def export(request: AuthenticatedHttpRequest, pk: int, fmt: str) -> HttpResponse:
    """The conversation as a Markdown or JSON file, downloaded (``attachment_response``)."""
    if fmt not in ("md", "json"):
        raise Http404("No such export format.")
    conv = _conversation(request, pk)
    data = export_data(conv)
    name = slugify(conv.title)[:60] or f"conversation-{conv.pk}"
    if fmt == "json":
        body = json.dumps(data, ensure_ascii=False, indent=2)
        return attachment_response(body, f"{name}.json", "application/json; charset=utf-8")
    return attachment_response(
        export_markdown(data, base_names(conv.organisation_id)), f"{name}.md", "text/markdown; charset=utf-8"
    )
