"""Knowledge-base pages: the organisation's bases, one base's documents, upload, delete.

Every lookup goes through the user's organisation: another organisation's base or document does
not exist here (404).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from assistant.orgs.services import organisation_of

from .extract import SUPPORTED
from .models import Document, KnowledgeBase
from .uploads import UploadRefused, add_documents, delete_document


def _base(request: HttpRequest, slug: str) -> KnowledgeBase:
    return get_object_or_404(KnowledgeBase, organisation=organisation_of(request.user), slug=slug)


def _base_context(kb: KnowledgeBase, error: str = "") -> dict[str, object]:
    from django.conf import settings

    return {
        "kb": kb,
        "documents": kb.documents.order_by("-created", "-pk"),
        "error": error,
        "accept": ",".join(SUPPORTED),
        "max_mb": settings.KB_MAX_UPLOAD_MB,
    }


@login_required
@require_GET
def bases(request: HttpRequest) -> HttpResponse:
    org = organisation_of(request.user)
    kbs = KnowledgeBase.objects.filter(organisation=org).annotate(document_count=Count("documents"))
    return render(request, "knowledge/bases.html", {"bases": kbs, "organisation": org})


@login_required
@require_http_methods(["GET", "POST"])
def base(request: HttpRequest, slug: str) -> HttpResponse:
    kb = _base(request, slug)
    if request.method == "POST":
        try:
            added = add_documents(kb, request.FILES.getlist("files"))
        except UploadRefused as e:
            return render(request, "knowledge/base.html", _base_context(kb, str(e)), status=400)
        messages.success(
            request,
            ngettext("%(count)d document added.", "%(count)d documents added.", len(added)) % {"count": len(added)},
        )
        return redirect("kb_base", slug=kb.slug)
    return render(request, "knowledge/base.html", _base_context(kb))


@login_required
@require_POST
def delete(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    org = organisation_of(request.user)
    doc = get_object_or_404(Document, pk=pk, knowledge_base__organisation=org, knowledge_base__slug=slug)
    kb = doc.knowledge_base
    title = doc.title
    delete_document(doc)
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "knowledge/_documents.html", _base_context(kb))
    messages.success(request, _("“%(title)s” was deleted.") % {"title": title})
    return redirect("kb_base", slug=kb.slug)
