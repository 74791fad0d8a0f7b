"""The agent panel: one agent of a run, followed live from its delegation line.

``GET /c/<id>/runs/<run>/agents/<agent_id>/`` renders the panel from the saved steps, for the
conversation's owner only (404 for anyone else, as for an agent that does not exist); asked for without
htmx (a new tab, no scripts), the same agent as a page of its own (``chat/agent_page.html``). The page then
sends ``{"follow_agent": {"run": …, "agent": …}}`` over the conversation's websocket, and the consumer
pushes the panel's body (``chat/_agent_panel_body.html``) each time that agent's state changes.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from assistant.orgs.http import AuthenticatedHttpRequest
from assistant.runs.models import Run

from .live import find_conversation
from .presenters import agent_of, run_view


@login_required
@require_GET
def agent_panel(request: AuthenticatedHttpRequest, pk: int, run_id: uuid.UUID, agent_id: str) -> HttpResponse:
    conversation = find_conversation(request.user, pk)
    run = Run.objects.filter(pk=run_id, conversation=conversation).first() if conversation is not None else None
    if run is None:
        raise Http404("No such agent.")
    view = run_view(run)
    agent = agent_of(view, agent_id)
    if agent is None:
        raise Http404("No such agent.")
    # The page's link loads the panel (htmx); opened in a new tab, or without scripts, it is a page of its own.
    template = "chat/_agent_panel.html" if request.htmx else "chat/agent_page.html"
    return render(request, template, {"view": view, "agent": agent})
