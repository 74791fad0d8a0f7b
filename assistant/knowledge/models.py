"""Knowledge bases and their documents, per organisation."""

from __future__ import annotations

import uuid
from pathlib import Path

from django.db import models

from assistant.orgs.models import Organisation
from assistant.orgs.translated import Translated


class KnowledgeBase(Translated):
    translated_fields = ("name", "description")

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="knowledge_bases")
    slug = models.SlugField()
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organisation", "slug"], name="kb_slug_per_org")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def shown_description(self) -> str:
        return self.shown("description")


def _upload_to(document: Document, filename: str) -> str:
    # The stored name never comes from the user: the base's id and a random name, the extension kept.
    suffix = Path(filename).suffix.lower()[:10]
    return f"kb/{document.knowledge_base_id}/{uuid.uuid4().hex}{suffix}"


class Document(Translated):
    """A document of a base. An upload is ``processing`` until its text is extracted (``processing.py``), then
    ``ready`` or ``failed`` (``failure`` is a code of ``extract.py`` or ``processing.py``, ``failure_params``
    its numbers, worded by the pages). Only ready documents are searched and read. Its title is shown as written,
    or in the reader's language where ``translations`` holds it (a title that exists in both, as the demo's table's).
    """

    translated_fields = ("title",)

    PROCESSING = "processing"
    READY = "ready"
    FAILED = "failed"
    STATUSES = [(PROCESSING, "processing"), (READY, "ready"), (FAILED, "failed")]

    knowledge_base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="documents")
    title = models.CharField(max_length=300)
    text = models.TextField()
    created = models.DateTimeField(auto_now_add=True)
    # The uploaded original (none for documents created by code, e.g. the demo data).
    file = models.FileField(upload_to=_upload_to, blank=True, max_length=300)
    filename = models.CharField(max_length=255, blank=True)
    size = models.PositiveBigIntegerField(default=0)
    # Documents created by code (the demo data) are ready at once; uploads start processing.
    status = models.CharField(max_length=12, choices=STATUSES, default=READY, db_index=True)
    failure = models.CharField(max_length=40, blank=True)
    failure_params = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["pk"]

    @property
    def public_id(self) -> str:
        """The id models and users see."""
        return f"doc-{self.pk}"

    @property
    def shown_title(self) -> str:
        return self.shown("title")

    @classmethod
    def shown_titles(cls, organisation_id: int) -> dict[str, str]:
        """The organisation's documents whose title has other languages' words: each one's public id to its title in
        the reader's language (the others are shown as written: absent here)."""
        rows = cls.objects.filter(knowledge_base__organisation_id=organisation_id).exclude(translations={})
        return {d.public_id: d.shown_title for d in rows.only("pk", "title", "translations")}

    @property
    def processing(self) -> bool:
        return self.status == self.PROCESSING

    def __str__(self) -> str:
        return self.title


def _table_upload_to(table: Table, filename: str) -> str:
    return f"kb/{table.knowledge_base_id}/tables/{uuid.uuid4().hex}.parquet"


class Table(models.Model):
    """A table of a base: a CSV or Parquet document, or one sheet of an XLSX one, stored as a Parquet file when
    its document was extracted, for ``data_query`` (``engine/tables.py``) to load. ``name`` is what queries
    name it by, unique within the base; ``columns`` is ``[[name, DuckDB type], ...]``."""

    knowledge_base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="tables")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="tables")
    name = models.CharField(max_length=80)
    sheet = models.CharField(max_length=200, blank=True)
    columns = models.JSONField(default=list)
    row_count = models.PositiveBigIntegerField(default=0)
    file = models.FileField(upload_to=_table_upload_to, max_length=300)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["knowledge_base", "name"], name="table_name_per_base")]
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.name
