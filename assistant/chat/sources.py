"""Sources that open: a document's page, with the passages a run read marked, and its file for download.

Each read a run makes records the range it returned (``Source.start``/``end``, from ``kb_read``); the page marks
the ranges that the run named in ``?run=`` read of this document. Only the organisation's members see a document
(404 otherwise); the run's ranges only for the run's own user. The download is always an attachment with a
sandboxing policy (``attachment_response``): an uploaded HTML or SVG never runs on this site. (A page of the
demo web opens in ``assistant.demo``.)
"""

from __future__ import annotations

import mimetypes
import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from assistant.knowledge.models import Document
from assistant.orgs.http import AuthenticatedHttpRequest, attachment_response
from assistant.orgs.services import organisation_of
from assistant.runs.leases import SOURCE_STEPS
from assistant.runs.models import Run
from assistant.runs.steps import events_of


def _document(request: AuthenticatedHttpRequest, pk: int) -> Document:
    org = organisation_of(request.user)
    return get_object_or_404(Document.objects.select_related("knowledge_base"), pk=pk, knowledge_base__organisation=org)


def read_ranges(run: Run, document: Document) -> list[tuple[int, int]]:
    """The ranges of the document's text that the run's reads returned (main model and agents), merged."""
    wanted = document.public_id
    ranges = []
    for event in events_of(run.steps.filter(kind__in=SOURCE_STEPS)):
        for s in getattr(event, "sources", ()):
            start, end = s.start, s.end
            if s.id == wanted and start is not None and end is not None and end > start:
                ranges.append((max(start, 0), min(end, len(document.text))))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        elif end > start:
            merged.append((start, end))
    return merged


def segments(text: str, ranges: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """The text cut into (piece, read?) in order."""
    out, at = [], 0
    for start, end in ranges:
        if start > at:
            out.append((text[at:start], False))
        out.append((text[start:end], True))
        at = end
    if at < len(text):
        out.append((text[at:], False))
    return out


@login_required
@require_GET
def document(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    doc = _document(request, pk)
    ranges: list[tuple[int, int]] = []
    back = ""  # the answer that opened it, in its conversation
    try:
        run_id = uuid.UUID(request.GET.get("run", ""))
    except ValueError:
        run_id = None
    if run_id is not None:
        run = Run.objects.filter(
            pk=run_id,
            organisation=doc.knowledge_base.organisation,
            user=request.user,
            conversation__deleted__isnull=True,
        ).first()
        if run is not None:
            ranges = read_ranges(run, doc)
            back = reverse("conversation", args=[run.conversation_id]) + f"#turn-{run.pk}"
    context = {"doc": doc, "segments": segments(doc.text, ranges), "marked": len(ranges), "back": back}
    return render(request, "chat/document.html", context)


@login_required
@require_GET
def download(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The uploaded original (or, for a document created by code, its text), as an attachment."""
    doc = _document(request, pk)
    if doc.file:
        with doc.file.open("rb") as f:
            content = f.read()
        name = doc.filename or doc.file.name.rsplit("/", 1)[-1]
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return attachment_response(content, name, kind)
    return attachment_response(doc.text, f"{doc.title[:100] or doc.public_id}.txt", "text/plain; charset=utf-8")
