"""Chosen documents (``doc:<slug>/<id>``) a request names, checked against one organisation before it starts.

A chosen document must be a document of a base of the organisation, and ready to be read. The engine enforces
the scope again in its tools; this check gives the browser and the API a clear refusal instead of a run that
cannot read what it was given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from assistant.engine.scope import DOC_PREFIX, parse_document

from .models import Document, KnowledgeBase


@dataclass(frozen=True, slots=True)
class DocumentRefused:
    """Why one ``doc:`` resource is refused: ``code`` is ``document_not_found`` or ``document_not_ready``."""

    resource: str
    code: Literal["document_not_found", "document_not_ready"]
    message: str


def refused_document(organisation_id: int, resources: Iterable[str]) -> DocumentRefused | None:
    """The first chosen document among ``resources`` that this organisation cannot hand on, and why."""
    chosen = [(r, doc) for r in resources if r.startswith(DOC_PREFIX) for doc in [parse_document(r)]]
    if not chosen:
        return None  # no document chosen: nothing to read (every request without one goes through here)
    for resource, doc in chosen:
        if doc is None:
            return DocumentRefused(
                resource,
                "document_not_found",
                f"'{resource}' names no document: use doc:<slug>/<id>, e.g. doc:factures/doc-12.",
            )
    slugs = {doc[0] for _r, doc in chosen if doc is not None}
    bases = set(
        KnowledgeBase.objects.filter(organisation_id=organisation_id, slug__in=slugs).values_list("slug", flat=True)
    )
    pks = [int(d[1][4:]) for _r, d in chosen if d is not None and d[1].startswith("doc-") and d[1][4:].isdigit()]
    rows = {
        f"doc-{row.pk}": row
        for row in Document.objects.filter(pk__in=pks, knowledge_base__organisation_id=organisation_id).select_related(
            "knowledge_base"
        )
    }
    for resource, doc in chosen:
        assert doc is not None
        kb, doc_id = doc
        if kb not in bases:
            return DocumentRefused(
                resource, "document_not_found", f"The knowledge base '{kb}' does not exist or you may not read it."
            )
        row = rows.get(doc_id)
        if row is None or row.knowledge_base.slug != kb:
            return DocumentRefused(
                resource, "document_not_found", f"The document '{doc_id}' is not in the knowledge base '{kb}'."
            )
        if row.status != Document.READY:  # an upload still processing, or one that failed
            return DocumentRefused(
                resource,
                "document_not_ready",
                f"The document '{doc_id}' of '{kb}' is not ready to be read (its text is not extracted).",
            )
    return None
