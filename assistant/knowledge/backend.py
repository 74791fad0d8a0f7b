"""The engine's ``KnowledgeBackend`` and ``TableBackend`` over the database, confined to one organisation and its
ready documents."""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import sync_to_async
from django.db.models import Count, Q, QuerySet

from assistant.engine.errors import OutOfScope
from assistant.engine.tables import Column, TableCatalogue, TableInfo
from assistant.engine.tools import Document, Hit, KnowledgeBaseInfo

from . import fulltext
from .models import Document as DocumentRow
from .models import KnowledgeBase, Table


class OrgKnowledge:
    """Knowledge bases of one organisation; another organisation's bases and documents do not exist here."""

    def __init__(self, organisation_id: int) -> None:
        self.organisation_id = organisation_id

    async def describe(self, kb: str) -> KnowledgeBaseInfo | None:
        ready = Count("documents", filter=Q(documents__status=DocumentRow.READY))
        rows = KnowledgeBase.objects.filter(organisation_id=self.organisation_id, slug=kb).annotate(ready=ready)
        row = await rows.afirst()  # one query: a run's start reads each of its bases
        if row is None:
            return None
        return KnowledgeBaseInfo(slug=row.slug, name=row.name, description=row.description, document_count=row.ready)

    async def existing(self, kbs: Sequence[str]) -> set[str]:
        rows = KnowledgeBase.objects.filter(organisation_id=self.organisation_id, slug__in=list(kbs))
        return {slug async for slug in rows.values_list("slug", flat=True)}  # one query for a run's bases

    async def search(self, kb: str, query: str, limit: int, ids: Sequence[str] | None = None) -> tuple[list[Hit], int]:
        """Ranked full-text hits (FTS5 on SQLite, tsvector on PostgreSQL) and the number of matches;
        with ``ids`` (chosen documents), among those documents only."""
        pks = None if ids is None else _pks(ids)
        return await sync_to_async(fulltext.search)(self.organisation_id, kb, query, limit, pks)

    async def read(self, ids: Sequence[str]) -> dict[str, Document]:
        pks = _pks(ids)
        rows = DocumentRow.objects.filter(
            pk__in=pks, knowledge_base__organisation_id=self.organisation_id, status=DocumentRow.READY
        ).values_list("pk", "knowledge_base__slug", "title", "text")
        found: list[tuple[int, str, str, str]] = await sync_to_async(lambda: list(rows))()  # what it needs, one trip
        return {f"doc-{pk}": Document(id=f"doc-{pk}", kb=kb, title=title, text=text) for pk, kb, title, text in found}

    async def documents(self, kb: str) -> list[Document]:
        """Every document of the base ``kb`` of this organisation (``run_code``'s read-only export)."""
        rows = DocumentRow.objects.filter(
            knowledge_base__organisation_id=self.organisation_id, knowledge_base__slug=kb, status=DocumentRow.READY
        ).values_list("pk", "title", "text", "translations")
        names = Table.objects.filter(
            knowledge_base__organisation_id=self.organisation_id, knowledge_base__slug=kb
        ).values_list("document_id", "name")
        tables: dict[int, list[str]] = {}
        async for document, name in names.order_by("name"):
            tables.setdefault(document, []).append(name)
        return [
            Document(
                id=f"doc-{pk}",
                kb=kb,
                title=title,
                text=text,
                titles=_titles(translations),
                tables=tuple(tables.get(pk, ())),
            )
            async for pk, title, text, translations in rows
        ]

    def _tables(self) -> QuerySet[Table]:
        return Table.objects.filter(
            knowledge_base__organisation_id=self.organisation_id, document__status=DocumentRow.READY
        ).order_by("knowledge_base__slug", "name")

    def catalogue(self) -> TableCatalogue:
        """The tables of each base, now (synchronous: when a run's toolbox is made). Only the fields a ``TableInfo``
        needs, as values: every run reads it, and building the models cost more than the query."""
        tables: dict[str, list[TableInfo]] = {}
        rows = self._tables().values_list(
            "knowledge_base__slug", "name", "document_id", "document__title", "sheet", "columns", "row_count"
        )
        for kb, name, document_id, title, sheet, columns, row_count in rows:
            tables.setdefault(kb, []).append(_table_info(kb, name, document_id, title, sheet, columns, row_count))
        return TableCatalogue(tables)

    async def tables(self, kbs: Sequence[str]) -> list[TableInfo]:
        rows = self._tables().filter(knowledge_base__slug__in=list(kbs))
        return [_info(row) async for row in rows.select_related("knowledge_base", "document").defer("document__text")]

    async def parquet(self, table: TableInfo) -> str | bytes:
        """A local path when the storage has one (``MEDIA_ROOT``), else the file's bytes (an object store)."""
        row = await self._tables().filter(knowledge_base__slug=table.kb, name=table.name).afirst()
        if row is None:
            raise OutOfScope(f"The table '{table.name}' no longer exists.")
        return await sync_to_async(_parquet_of)(row)


def _info(row: Table) -> TableInfo:
    return _table_info(
        row.knowledge_base.slug, row.name, row.document.pk, row.document.title, row.sheet, row.columns, row.row_count
    )


def _table_info(
    kb: str, name: str, document_id: int, title: str, sheet: str, columns: list[list[str]], row_count: int
) -> TableInfo:
    return TableInfo(
        kb=kb,
        name=name,
        document_id=f"doc-{document_id}",
        title=title + (f" ({sheet})" if sheet else ""),
        columns=tuple(Column(str(c), str(k)) for c, k in columns),
        row_count=row_count,
    )


def _parquet_of(row: Table) -> str | bytes:
    storage = row.file.storage
    try:
        return str(storage.path(row.file.name))
    except NotImplementedError:
        with storage.open(row.file.name, "rb") as f:
            return bytes(f.read())


def _titles(translations: object) -> dict[str, str]:
    """A document's title in its other languages, from its ``translations`` (``Translated``)."""
    if not isinstance(translations, dict):
        return {}
    words = {language: w.get("title") for language, w in translations.items() if isinstance(w, dict)}
    return {language: str(title) for language, title in words.items() if title}


def _pks(ids: Sequence[str]) -> list[int]:
    """The primary keys of the public ids ``doc-<pk>`` among ``ids`` (anything else names no document)."""
    return [int(i[4:]) for i in ids if i.startswith("doc-") and i[4:].isdigit()]
