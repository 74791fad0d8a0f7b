"""Sources that open: a document's page, with the passages a run read marked, and its file for download.

Each read a run makes records the range it returned (``Source.start``/``end``, from ``kb_read``); the page marks
the ranges that the run named in ``?run=`` read of this document. Only the organisation's members see a document
(404 otherwise); the run's ranges only for the run's own user. The download is always an attachment with a
sandboxing policy (``attachment_response``): an uploaded HTML or SVG never runs on this site. (A page of the
demo web opens in ``assistant.demo``.)

A document's text is shown a part at a time (``PART_CHARS``), each part read from the database alone: a page of a
text of millions of characters costs the server what one part costs, and the next part comes as the reader scrolls
to it (``document_part``, an htmx fragment that ends with the request for the part after it). A document of one
part, most of them, is shown whole at once.
"""

from __future__ import annotations

import mimetypes
import uuid

from django.contrib.auth.decorators import login_required
from django.db.models.functions import Length, Substr
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from assistant.knowledge.models import Document
from assistant.orgs.http import AuthenticatedHttpRequest, attachment_response
from assistant.orgs.services import organisation_of
from assistant.runs.leases import SOURCE_STEPS
from assistant.runs.models import Run
from assistant.runs.steps import events_of

PART_CHARS = 200_000
"""Characters of a document's text in one part of its page (about a hundred printed pages)."""


def _document(request: AuthenticatedHttpRequest, pk: int) -> Document:
    org = organisation_of(request.user)
    return get_object_or_404(Document.objects.select_related("knowledge_base"), pk=pk, knowledge_base__organisation=org)


def _document_part(request: AuthenticatedHttpRequest, pk: int, start: int) -> tuple[Document, int, str]:
    """The document (without its whole text), its text's length, and its part from ``start`` (``PART_CHARS`` at
    most): the database cuts it out, so the server never holds a text of millions of characters for one page."""
    org = organisation_of(request.user)
    doc = get_object_or_404(
        Document.objects.select_related("knowledge_base")
        .defer("text")
        .annotate(text_length=Length("text"), part=Substr("text", start + 1, PART_CHARS)),
        pk=pk,
        knowledge_base__organisation=org,
    )
    return doc, doc.text_length or 0, doc.part or ""  # type: ignore[attr-defined]  # the annotations above


def read_ranges(run: Run, document: Document, length: int) -> list[tuple[int, int]]:
    """The ranges of the document's text (``length`` characters) that the run's reads returned (main model and
    agents), merged."""
    wanted = document.public_id
    ranges = []
    for event in events_of(run.steps.filter(kind__in=SOURCE_STEPS)):
        for s in getattr(event, "sources", ()):
            start, end = s.start, s.end
            if s.id == wanted and start is not None and end is not None and end > start:
                ranges.append((max(start, 0), min(end, length)))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        elif end > start:
            merged.append((start, end))
    return merged


def segments(text: str, ranges: list[tuple[int, int]], offset: int = 0) -> list[tuple[str, bool]]:
    """``text`` (the document's from ``offset``) cut into (piece, read?) in order; the ranges are the document's."""
    out, at = [], 0
    for range_start, range_end in ranges:
        start, end = max(range_start - offset, 0), min(range_end - offset, len(text))
        if end <= start:
            continue
        if start > at:
            out.append((text[at:start], False))
        out.append((text[start:end], True))
        at = end
    if at < len(text):
        out.append((text[at:], False))
    return out


def _start(request: HttpRequest) -> int:
    """Where the part asked for (``?from=``) starts: a character of the text, 0 when absent or not a number (a number
    past any text is kept within what the database counts)."""
    try:
        return min(max(int(request.GET.get("from", "0")[:20]), 0), 2**53)
    except ValueError:
        return 0


def _own_run(request: AuthenticatedHttpRequest, doc: Document) -> Run | None:
    """The run named in ``?run=``, when it is the reader's own, of the document's organisation, in a conversation
    not deleted: only then are its passages marked."""
    try:
        run_id = uuid.UUID(request.GET.get("run", ""))
    except ValueError:
        return None
    return Run.objects.filter(
        pk=run_id,
        organisation_id=doc.knowledge_base.organisation_id,
        user=request.user,
        conversation__deleted__isnull=True,
    ).first()


def _part_context(
    doc: Document, run: Run | None, ranges: list[tuple[int, int]], length: int, start: int, text: str
) -> dict[str, object]:
    """What a part shows: its pieces, each read or not (the first passage read, where it begins, is the anchor
    ``#read``), and where the next part starts (None: this one ends the text)."""
    after = start + len(text)
    first = ranges[0][0] if ranges else -1
    pieces: list[tuple[str, bool, bool]] = []
    at = start
    for piece, read in segments(text, ranges, start):
        pieces.append((piece, read, read and at == first))
        at += len(piece)
    return {"doc": doc, "run": run, "pieces": pieces, "next": after if after < length else None}


@login_required
@require_GET
def document(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    start = _start(request)
    doc, length, text = _document_part(request, pk, start)
    run = _own_run(request, doc)
    ranges = read_ranges(run, doc, length) if run is not None else []
    # A passage read outside this part: a link opens the part that holds the first one, a little before it.
    first = ranges[0][0] if ranges else None
    elsewhere = first is not None and not start <= first < start + len(text)
    context = {
        **_part_context(doc, run, ranges, length, start, text),
        "marked": len(ranges),
        "first_read": max(first - 1_000, 0) if first is not None and elsewhere else None,
        "start": start,
        "back": reverse("conversation", args=[run.conversation_id]) + f"#turn-{run.pk}" if run is not None else "",
    }
    return render(request, "chat/document.html", context)


@login_required
@require_GET
def document_part(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The part of the text from ``?from=``, the page's next as the reader scrolls (the page's own fragment)."""
    start = _start(request)
    doc, length, text = _document_part(request, pk, start)
    run = _own_run(request, doc)
    ranges = read_ranges(run, doc, length) if run is not None else []
    return render(request, "chat/_document_part.html", _part_context(doc, run, ranges, length, start, text))


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
