"""The engine's ``KnowledgeBackend`` over the database, confined to one organisation and its ready documents."""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import sync_to_async

from assistant.engine.tools import Document, Hit, KnowledgeBaseInfo

from . import fulltext
from .models import Document as DocumentRow
from .models import KnowledgeBase


class OrgKnowledge:
    """Knowledge bases of one organisation; another organisation's bases and documents do not exist here."""

    def __init__(self, organisation_id: int) -> None:
        self.organisation_id = organisation_id

    async def describe(self, kb: str) -> KnowledgeBaseInfo | None:
        row = await KnowledgeBase.objects.filter(organisation_id=self.organisation_id, slug=kb).afirst()
        if row is None:
            return None
        count = await row.documents.filter(status=DocumentRow.READY).acount()
        return KnowledgeBaseInfo(slug=row.slug, name=row.name, description=row.description, document_count=count)

    async def search(self, kb: str, query: str, limit: int) -> tuple[list[Hit], int]:
        """Ranked full-text hits (FTS5 on SQLite, tsvector on PostgreSQL) and the number of matches."""
        return await sync_to_async(fulltext.search)(self.organisation_id, kb, query, limit)

    async def read(self, ids: Sequence[str]) -> dict[str, Document]:
        pks = [int(i[4:]) for i in ids if i.startswith("doc-") and i[4:].isdigit()]
        rows = DocumentRow.objects.filter(
            pk__in=pks, knowledge_base__organisation_id=self.organisation_id, status=DocumentRow.READY
        ).select_related("knowledge_base")
        return {
            f"doc-{row.pk}": Document(id=f"doc-{row.pk}", kb=row.knowledge_base.slug, title=row.title, text=row.text)
            async for row in rows
        }

    async def documents(self, kb: str) -> list[Document]:
        """Every document of the base ``kb`` of this organisation (``run_code``'s read-only export)."""
        rows = DocumentRow.objects.filter(
            knowledge_base__organisation_id=self.organisation_id, knowledge_base__slug=kb, status=DocumentRow.READY
        ).values_list("pk", "title", "text")
        return [Document(id=f"doc-{pk}", kb=kb, title=title, text=text) async for pk, title, text in rows]
