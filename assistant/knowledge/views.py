"""Knowledge-base pages: the organisation's bases, one base's documents, upload, delete.

An upload answers at once: its documents show "processing" until their text is extracted off the
request (``processing``), then "ready" or why they failed; the documents list polls its fragment
(``kb_documents``) while one of them is processing.

Every lookup goes through the user's organisation: another organisation's base or document does
not exist here (404), for its admins too. Members see the bases and upload documents; creating,
editing and deleting a base, and deleting a document, are for the organisation's admins (403).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from assistant.orgs import audit
from assistant.orgs.http import AuthenticatedHttpRequest
from assistant.orgs.models import Organisation
from assistant.orgs.services import administered_organisation, is_admin, organisation_of

from .extract import SUPPORTED
from .forms import KnowledgeBaseForm, slug_taken
from .models import Document, KnowledgeBase
from .processing import fail_stale
from .uploads import UploadRefused, add_documents, delete_base, delete_document


def _base(request: AuthenticatedHttpRequest, slug: str) -> KnowledgeBase:
    return get_object_or_404(KnowledgeBase, organisation=organisation_of(request.user), slug=slug)


def _require_admin(request: AuthenticatedHttpRequest, org: Organisation) -> None:
    """After the lookup in the user's own organisation (404 first), a member gets 403."""
    if not is_admin(request.user, org):
        raise PermissionDenied("Only an admin of the organisation can manage its knowledge bases.")


def _base_context(request: AuthenticatedHttpRequest, kb: KnowledgeBase, error: str = "") -> dict[str, object]:
    from django.conf import settings

    # A document processing for longer than any extraction may take was left by a stopped server.
    fail_stale(settings.KB_EXTRACT_STALE_SECONDS)
    documents = list(kb.documents.order_by("-created", "-pk").prefetch_related("tables"))
    return {
        "kb": kb,
        "can_manage": is_admin(request.user, kb.organisation),
        "documents": documents,
        "any_processing": any(doc.processing for doc in documents),
        "error": error,
        "accept": ",".join(SUPPORTED),
        "accepted": ", ".join(SUPPORTED),  # as the hint reads them
        "max_mb": settings.KB_MAX_UPLOAD_MB,
        "max_files": settings.KB_MAX_UPLOAD_FILES,
    }


@login_required
@require_GET
def bases(request: AuthenticatedHttpRequest) -> HttpResponse:
    org = organisation_of(request.user)
    kbs = KnowledgeBase.objects.filter(organisation=org).annotate(document_count=Count("documents"))
    return render(
        request, "knowledge/bases.html", {"bases": kbs, "organisation": org, "can_manage": is_admin(request.user, org)}
    )


def _form_page(request: AuthenticatedHttpRequest, org: Organisation, kb: KnowledgeBase | None) -> HttpResponse:
    form = KnowledgeBaseForm(request.POST or None, instance=kb, organisation=org)
    context = {"form": form, "kb": kb}
    if request.method == "POST":
        if form.is_valid():
            try:
                with transaction.atomic():
                    saved = form.save()
                    audit.saved(request.user, org, "kb", kb is None, saved.name, previous=form.initial.get("name"))
            except IntegrityError:  # the same slug saved by someone else since the form was checked
                form.add_error("slug", slug_taken(form.cleaned_data["slug"]))
            else:
                messages.success(request, _("The knowledge base “%(name)s” is saved.") % {"name": saved.name})
                return redirect("kb_base", slug=saved.slug)
        return render(request, "knowledge/form.html", context, status=422)
    return render(request, "knowledge/form.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def base_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    return _form_page(request, administered_organisation(request.user), None)


@login_required
@require_http_methods(["GET", "POST"])
def base_edit(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    kb = _base(request, slug)
    _require_admin(request, kb.organisation)
    return _form_page(request, kb.organisation, kb)


@login_required
@require_http_methods(["GET", "POST"])
def base_delete(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """GET asks for confirmation; only a POST deletes the base, its documents and their files."""
    kb = _base(request, slug)
    _require_admin(request, kb.organisation)
    if request.method == "POST":
        name = kb.name
        count = delete_base(kb)
        audit.record(request.user, kb.organisation, "kb.deleted", name, slug=slug, documents=count)
        messages.success(
            request,
            ngettext(
                "The knowledge base “%(name)s” and its %(count)d document were deleted.",
                "The knowledge base “%(name)s” and its %(count)d documents were deleted.",
                count,
            )
            % {"name": name, "count": count},
        )
        return redirect("kb_bases")
    return render(request, "knowledge/delete.html", {"kb": kb, "document_count": kb.documents.count()})


@login_required
@require_http_methods(["GET", "POST"])
def base(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    kb = _base(request, slug)
    if request.method == "POST":
        try:
            added, refused = add_documents(kb, request.FILES.getlist("files"))
        except UploadRefused as e:
            return render(request, "knowledge/base.html", _base_context(request, kb, str(e)), status=422)
        messages.success(
            request,
            ngettext(
                "%(count)d document added: it is being read, and can be searched once ready.",
                "%(count)d documents added: they are being read, and can be searched once ready.",
                len(added),
            )
            % {"count": len(added)},
        )
        for why in refused:  # the others were added; each refused one is named, with why
            messages.error(request, _("Not added: %(why)s") % {"why": why})
        return redirect("kb_base", slug=kb.slug)
    return render(request, "knowledge/base.html", _base_context(request, kb))


@login_required
@require_GET
def documents(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The documents list alone, which the page polls while a document is processing."""
    return render(request, "knowledge/_documents.html", _base_context(request, _base(request, slug)))


@login_required
@require_POST
def delete(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    org = organisation_of(request.user)
    doc = get_object_or_404(Document, pk=pk, knowledge_base__organisation=org, knowledge_base__slug=slug)
    kb = doc.knowledge_base
    _require_admin(request, org)
    title = doc.title
    delete_document(doc)
    if request.htmx:
        return render(request, "knowledge/_documents.html", _base_context(request, kb))
    messages.success(request, _("“%(title)s” was deleted.") % {"title": title})
    return redirect("kb_base", slug=kb.slug)
