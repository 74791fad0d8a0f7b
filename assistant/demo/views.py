"""A page of the demo web (``?url=`` one of its fictional addresses, which no browser could open): its text, here,
labelled as the demo web; its HTML is never served. A run's source, and a link to it in an answer, open it."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from assistant.orgs.http import AuthenticatedHttpRequest

from .web import demo_web


@login_required
@require_GET
def demo_web_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The text of one page of the demo web, as web_fetch read it (a run's source links here)."""
    page = demo_web().page(request.GET.get("url", ""))
    if page is None:
        raise Http404("No such page on the demo web.")
    context = {"page": page, "paragraphs": [line for line in page.text.splitlines() if line.strip()]}
    return render(request, "demo/page.html", context)
