"""The chat pages: conversations, the composer, each run's answer and delegations, Stop.

Pages render everything saved so far; the conversation's websocket (``consumers``) then keeps them
up to date. With htmx, sending and stopping swap fragments; without it, plain posts and redirects.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from assistant.budgets import services as budgets
from assistant.budgets import spend_state
from assistant.catalogue import snapshot
from assistant.connectors import directory as connectors
from assistant.engine.errors import RequestRefused
from assistant.engine.policy import LEVELS, Level
from assistant.engine.scope import Scope, parse_document
from assistant.knowledge.models import Document, KnowledgeBase
from assistant.knowledge.tools import demo_web_on
from assistant.orgs.http import AuthenticatedHttpRequest
from assistant.orgs.models import Organisation
from assistant.orgs.services import organisation_of, policy_for
from assistant.runs import execution, groups, intake, queue, wording
from assistant.runs.intake import LEVEL_LABELS
from assistant.runs.models import Conversation, Message, Run
from assistant.runs.start import RunStart

from . import deletion
from .htmx import REFUSED
from .presenters import run_view
from .rendering import render_markdown

log = logging.getLogger(__name__)

QUESTION_KEY = re.compile(r"[0-9a-f]{32}")
"""A question's key (``engine.estimate.Question.key``)."""


def _composer(org: Organisation, values: dict[str, Any] | None = None) -> dict[str, Any]:
    catalogue = snapshot.catalogue()
    policy = policy_for(org)
    allowed = [catalogue[m] for m in policy.allowed_ids(catalogue)]
    kbs = list(KnowledgeBase.objects.filter(organisation=org))
    toolbox = execution.toolbox_for(org.pk)
    tools = [
        {"value": value, "label": label, "available": bool(toolbox.tools_for(Scope.from_resources([value])))}
        for value, label in (("web", _("Demo web") if demo_web_on() else _("Web")), ("code", _("Code")))
    ]
    categories = budgets.categories_of(org)
    allowed_ids = [m.id for m in allowed]
    defaults = {
        "text": "",
        "category": next((c.slug for c in categories if c.is_default), ""),
        "model": allowed[0].id if allowed else "",
        "level": "approfondi",
        "resources": [f"kb:{kb.slug}" for kb in kbs] + ["agents"],
    }
    values = {**defaults, **(values or {})}
    # The "+" menu's resources, group by group; the chips show the ticked ones.
    resources = [
        *(
            {
                "group": _("Knowledge bases"),
                "value": f"kb:{kb.slug}",
                "label": kb.shown_name,
                "title": kb.shown_description,
            }
            for kb in kbs
        ),
        *(
            {
                "group": _("Web and code"),
                "value": t["value"],
                "label": t["label"],
                "title": "",
                "off": not t["available"],
            }
            for t in tools
        ),
        *(
            {"group": _("Connectors"), "value": f"mcp:{c.name}", "label": c.name, "title": c.description}
            for c in connectors.offered(org.pk)
        ),
    ]
    return {
        "models": allowed,
        "resources": resources,
        "documents": _chosen_documents(org, values["resources"]),
        "has_bases": bool(kbs),
        "categories": categories,
        "levels": [(lv, LEVEL_LABELS[lv]) for lv in LEVELS],
        # Levels whose agent turn budget is 0: the composer says agents are off when one is chosen with Agents.
        "agents_off": [lv for lv in LEVELS if policy.levels[lv].agent_rounds == 0],
        # Models no allowed model is at least cheaper_factor times cheaper than: with them, agents do not run either.
        "no_cheaper": [m for m in allowed_ids if not catalogue.cheaper_than(m, allowed_ids, policy.cheaper_factor)],
        "cheaper_factor": policy.cheaper_factor,
        "values": values,
        "max_chars": settings.CHAT_MAX_MESSAGE_CHARS,
    }


def _chosen_documents(org: Organisation, resources: list[str]) -> list[dict[str, str]]:
    """The chosen documents (``doc:<kb>/<id>``) among the composer's resources, with the titles their chips show."""
    chosen = {r: doc for r in resources for doc in [parse_document(r)] if doc is not None}
    pks = [int(d[4:]) for _kb, d in chosen.values() if d.startswith("doc-") and d[4:].isdigit()]
    rows = Document.objects.filter(pk__in=pks, knowledge_base__organisation=org).select_related("knowledge_base")
    titles = {_document_value(d): _document_label(d) for d in rows}
    return [{"value": r, "label": titles.get(r, r)} for r in chosen]


def _document_value(document: Document) -> str:
    return f"doc:{document.knowledge_base.slug}/doc-{document.pk}"


def _document_label(document: Document) -> str:
    return _("“%(title)s” (%(kb)s)") % {"title": document.shown_title, "kb": document.knowledge_base.shown_name}


DOCUMENTS_FOUND = 20


@login_required
@require_GET
def find_documents(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The composer's "+" menu: ready documents of the organisation's bases whose title has the words typed, to choose."""
    query = _field(request.GET.dict(), "q").strip()[:200]
    org = organisation_of(request.user)
    found = []
    if query:
        rows = (
            Document.objects.filter(knowledge_base__organisation=org, status=Document.READY)
            .filter(Document.shown_contains("title", query))  # the title the reader is shown: in their language
            .select_related("knowledge_base")
            .order_by("title", "pk")[:DOCUMENTS_FOUND]
        )
        shown = sorted(rows, key=lambda d: (d.shown_title.casefold(), d.pk))
        found = [{"value": _document_value(d), "label": _document_label(d)} for d in shown]
    return render(request, "chat/_documents_found.html", {"documents": found, "query": query})


def last_choices(conversation: Conversation | None) -> dict[str, Any]:
    """The model, level, resources and category of the conversation's last message: what the composer keeps."""
    if conversation is None:
        return {}
    queued = conversation.messages.filter(queued=True).order_by("-pk").first()
    if queued is not None and queued.choices:
        return dict(queued.choices)
    run = conversation.runs.order_by("-created").first()
    if run is None:
        return {}
    return {"model": run.model, "level": run.level, "resources": list(run.resources), "category": run.category}


def _turns(conversation: Conversation) -> list[dict[str, Any]]:
    """The conversation's turns, latest versions only; each lists its previous versions (edited or regenerated)."""
    runs_by_id = {r.pk: r for r in conversation.runs.prefetch_related("steps")}
    questions = {m.run_id: m for m in conversation.messages.filter(role="user", queued=False) if m.run_id}
    items = []
    for m in questions.values():
        run = runs_by_id.get(m.run_id)  # type: ignore[arg-type]  # m.run_id is not None (filtered above); the stubs type it Optional
        if run is None or run.superseded:
            continue
        versions = [
            {"question": questions.get(v.pk), "run": v, "answer_html": render_markdown(v.answer)}
            for v in runs_by_id.values()
            if v.replaced_by_id == run.pk
        ]
        items.append({"question": m, "view": run_view(run), "versions": versions})
    return items


def _queued(conversation: Conversation | None) -> list[Message]:
    return list(conversation.messages.filter(queued=True).order_by("pk")) if conversation is not None else []


def _page(
    request: AuthenticatedHttpRequest,
    conversation: Conversation | None,
    values: dict[str, Any] | None = None,
    error: str = "",
    spend_refused: bool = False,
) -> dict[str, Any]:
    org = organisation_of(request.user)
    items = _turns(conversation) if conversation is not None else []
    composer = _composer(org, {**last_choices(conversation), **(values or {})})
    # The member's month at 80 % or 100 % of their spend limit: said next to the composer, before they send (not
    # twice when the refusal beside it says it already).
    composer["spend"] = "" if spend_refused else spend_state.banner_text(spend_state.state_for(org, request.user.pk))
    return {
        "conversations": Conversation.objects.filter(organisation=org, user=request.user, deleted__isnull=True)[:50],
        "conversation": conversation,
        "composer": composer,
        "error": error,
        "items": items,
        "queued": _queued(conversation),
        "running": [item["view"]["run"].pk.hex for item in items if item["view"]["run"].is_running],
    }


def _conversation(request: AuthenticatedHttpRequest, pk: int, org: Organisation | None = None) -> Conversation:
    # Another user's or organisation's conversation, or a deleted one, does not exist for this user.
    org = org or organisation_of(request.user)
    return get_object_or_404(Conversation, pk=pk, organisation=org, user=request.user, deleted__isnull=True)


@login_required
@require_GET
def home(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(request, "chat/page.html", _page(request, None))


@login_required
@require_GET
async def conversation(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    conv = await sync_to_async(_conversation)(request, pk)
    # Messages left queued with no run going on (the run they waited for was failed by a reaper, or the server
    # restarted): the next one is sent now.
    await queue.start_queued(conv.pk)
    context = await sync_to_async(_page)(request, conv)
    return await sync_to_async(render)(request, "chat/page.html", context)


def _field(post: dict[str, Any], name: str) -> str:
    # A NUL character is no text (PostgreSQL refuses it in a text column): dropped, as from documents.
    return str(post.get(name, "")).replace("\x00", "")


def _ask_from(post: dict[str, Any], resources: list[str]) -> tuple[intake.Ask, dict[str, Any]]:
    text = _field(post, "text").strip()
    level_raw = _field(post, "level")
    level: Level | None = level_raw if level_raw in LEVELS else None
    category = _field(post, "category")
    model = _field(post, "model")
    resources = [r.replace("\x00", "") for r in resources]
    values = {"text": text, "model": model, "level": level_raw, "resources": resources, "category": category}
    ask = intake.Ask(
        text=text,
        model=model,
        level=level,
        resources=tuple(resources),
        category=category,
        language=translation.get_language() or "",
    )
    return ask, values


def _create(request: AuthenticatedHttpRequest, pk: int | None) -> tuple[RunStart | Message | None, HttpResponse | None]:
    org = organisation_of(request.user)
    conv = _conversation(request, pk, org) if pk is not None else None
    ask, values = _ask_from(request.POST.dict(), request.POST.getlist("resources"))
    status = REFUSED
    spend_refused = False
    try:
        # A run, or a queued message while the conversation has one going on (one run at a time).
        return intake.submit(request.user, org, conv, ask), None
    except RequestRefused as e:
        error = wording.refusal_text(e.refusal)
        spend_refused = e.refusal.code in ("spend_limit_spent", "spend_limit_busy")
    except Exception:
        # Never a stack trace in the page: the reason in plain words, and the message kept.
        log.exception("could not start a run")
        error, status = (
            _("The assistant could not start this request; your message is kept. Try again in a moment."),
            503,
        )
    context = _page(request, conv, values, error, spend_refused)
    if request.htmx:
        return None, render(request, "chat/_composer.html", context, status=status)
    return None, render(request, "chat/page.html", context, status=status)


def _queued_response(request: AuthenticatedHttpRequest, message: Message) -> HttpResponseBase:
    """The composer again, empty with the same settings, and the message added to the queue above it."""
    if not request.htmx:
        return redirect("conversation", pk=message.conversation_id)
    org = organisation_of(request.user)
    context = {"conversation": message.conversation, "composer": _composer(org, message.choices), "message": message}
    response = render(request, "chat/_queued_sent.html", context)
    # Queued is sent: the page forgets the draft it kept, or a reload would bring the text back to be sent twice.
    response["HX-Trigger"] = "sent"
    return response


def _sent(request: AuthenticatedHttpRequest, run: Run) -> HttpResponse:
    """The composer again, empty with the same settings, and the new turn appended to the page."""
    org = organisation_of(request.user)
    values = {"model": run.model, "level": run.level, "resources": run.resources, "category": run.category}
    question = Message.objects.get(run=run, role="user")
    context = {
        "conversation": run.conversation,
        "composer": _composer(org, values),
        "item": {"question": question, "view": run_view(run, [])},
    }
    return render(request, "chat/_sent.html", context)


@login_required
@require_POST
async def send(request: AuthenticatedHttpRequest, pk: int | None = None) -> HttpResponseBase:
    start, refused = await sync_to_async(_create)(request, pk)
    if refused is not None:
        return refused
    if isinstance(start, Message):
        return await sync_to_async(_queued_response)(request, start)
    assert start is not None
    run = start.run
    await groups.announce_started(run)
    execution.launch(start)
    if request.htmx:
        if pk is not None:
            response = await sync_to_async(_sent)(request, run)
        else:
            response = HttpResponseClientRedirect(reverse("conversation", args=[run.conversation_id]))
        response["HX-Trigger"] = "sent"  # the page forgets the draft it kept (static/js/chat.js)
        return response
    return redirect("conversation", pk=run.conversation_id)


@login_required
@require_POST
async def stop(request: AuthenticatedHttpRequest, run_id: uuid.UUID) -> HttpResponseBase:
    user = await request.auser()
    org = await sync_to_async(organisation_of)(user)
    run = await Run.objects.filter(pk=run_id, organisation=org, user=user, conversation__deleted__isnull=True).afirst()
    if run is None:
        return HttpResponse("Not found", status=404)
    await execution.request_stop(run.pk)
    if request.htmx:
        # The button becomes "Stopping…"; the stopped run itself arrives through the websocket.
        await run.arefresh_from_db()
        return await sync_to_async(render)(request, "chat/_stop.html", {"view": {"run": run}})
    return redirect("conversation", pk=run.conversation_id)


@login_required
@require_POST
async def delegation_answer(request: AuthenticatedHttpRequest, pk: int, run_id: uuid.UUID) -> HttpResponseBase:
    """The user's answer to the question their run asks (a delegation over the organisation's cap): launch the agents
    (``launch=1``) or answer without them (``launch=0``). It reaches the run wherever it executes; the page hears
    what came of it from the run's steps. Only the run's own user answers, only the question it is asking now."""
    user = await request.auser()
    org = await sync_to_async(organisation_of)(user)
    run = await Run.objects.filter(
        pk=run_id, conversation_id=pk, organisation=org, user=user, conversation__deleted__isnull=True
    ).afirst()
    if run is None:
        return HttpResponse("Not found", status=404)
    question, launch = request.POST.get("question", ""), request.POST.get("launch", "")
    if launch not in ("0", "1") or not QUESTION_KEY.fullmatch(question):
        return HttpResponse("Bad request", status=400)
    # The run takes the answer to the question it asks now only (the key is that question's): one answered already,
    # over (the wait ended, the run stopped) or never asked changes nothing; the page shows what came of it.
    await execution.answer_question(run.pk, question, launch == "1")
    if request.htmx:
        return HttpResponse(status=204)
    return redirect("conversation", pk=run.conversation_id)


@login_required
@require_POST
async def agent_stop(request: AuthenticatedHttpRequest, run_id: uuid.UUID, agent_id: str) -> HttpResponseBase:
    """Stop one agent of the user's own run, alone: its siblings and the run go on (404 for anyone else's run, and
    for an agent the run never started). An agent that has ended is left as it is."""
    user = await request.auser()
    org = await sync_to_async(organisation_of)(user)
    run = await Run.objects.filter(pk=run_id, organisation=org, user=user, conversation__deleted__isnull=True).afirst()
    if run is None or not await run.steps.filter(kind="agent_started", agent_id=agent_id).aexists():
        return HttpResponse("Not found", status=404)
    if run.is_running:
        await execution.request_agent_stop(run.pk, agent_id)
    if request.htmx:
        # The button becomes "Stopping…"; the stopped agent itself arrives through the websocket.
        context = {"view": {"run": run}, "agent": {"agent_id": agent_id, "running": True}, "stopping": True}
        return await sync_to_async(render)(request, "chat/_agent_stop.html", context)
    return redirect("conversation", pk=run.conversation_id)


TITLE_MAX_LENGTH = 200


def _title_error(title: str) -> str:
    if not title:
        return _("A conversation needs a title: write at least one character. The title is unchanged.")
    if len(title) > TITLE_MAX_LENGTH:
        return _("A title has at most %(max)d characters. The title is unchanged.") % {"max": TITLE_MAX_LENGTH}
    return ""


@login_required
@require_POST
def rename(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The owner renames a conversation (trimmed, 1 to 200 characters); a refused title keeps the old one."""
    conv = _conversation(request, pk)
    title = _field(request.POST.dict(), "title").strip()
    error = _title_error(title)
    if not error:
        conv.title = title
        conv.save(update_fields=["title"])  # the sidebar keeps its order: renaming is not activity
    status = REFUSED if error else 200
    if request.htmx:
        # The heading again, and the sidebar's link swapped out of band.
        context = {"conversation": conv, "rename_error": error, "rename_value": title, "renamed": not error}
        return render(request, "chat/_head.html", context, status=status)
    if error:
        context = {**_page(request, conv), "rename_error": error, "rename_value": title}
        return render(request, "chat/page.html", context, status=status)
    return redirect("conversation", pk=conv.pk)


@login_required
@require_http_methods(["GET", "POST"])
async def delete(request: AuthenticatedHttpRequest, pk: int) -> HttpResponseBase:
    """GET: the confirmation page (without JavaScript). POST: stop its runs, erase it, back to the home page."""
    conv = await sync_to_async(_conversation)(request, pk)
    if request.method == "GET":
        running = await Run.objects.filter(conversation=conv, status=Run.Status.RUNNING).aexists()
        context = {"conversation": conv, "running": running}
        return await sync_to_async(render)(request, "chat/delete.html", context)
    await deletion.delete_conversation(conv)
    if request.htmx:
        return HttpResponseClientRedirect(reverse("home"))
    return redirect("home")
