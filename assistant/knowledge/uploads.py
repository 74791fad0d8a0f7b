"""Adding documents to a knowledge base from uploaded files, and removing them or a whole base: all or nothing.

An upload's type and size are checked in the request; its text (and a CSV's, XLSX's or Parquet file's
tables) is extracted afterwards, off the request (``processing``): the documents are saved
``processing`` and handed over once committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils.translation import gettext as _

from . import processing
from .extract import SUPPORTED, extension
from .models import Document, KnowledgeBase, Table


class UploadRefused(Exception):
    """An upload that cannot be added; the message says why, for the user. Nothing was saved."""


def max_upload_bytes() -> int:
    return int(settings.KB_MAX_UPLOAD_MB * 1024 * 1024)


def _read(upload: UploadedFile) -> tuple[str, bytes]:
    name = PurePath(upload.name or "document").name
    limit = max_upload_bytes()
    if extension(name) not in SUPPORTED:
        raise UploadRefused(
            _("%(name)s: this type of file is not supported (supported: %(types)s).")
            % {"name": name, "types": ", ".join(SUPPORTED)}
        )
    if upload.size is not None and upload.size > limit:
        raise UploadRefused(
            _("%(name)s is too large: %(size).1f MB, the limit is %(limit)g MB.")
            % {"name": name, "size": upload.size / 1024 / 1024, "limit": settings.KB_MAX_UPLOAD_MB}
        )
    data = upload.read(limit + 1)
    if len(data) > limit:
        raise UploadRefused(
            _("%(name)s is too large: the limit is %(limit)g MB.") % {"name": name, "limit": settings.KB_MAX_UPLOAD_MB}
        )
    return name, data


def add_documents(kb: KnowledgeBase, uploads: Sequence[UploadedFile]) -> tuple[list[Document], list[str]]:
    """Check every file first, then save the good ones (processing) in one transaction: the documents added,
    and why each refused file was (a sentence naming it). None good: ``UploadRefused`` saying why, nothing saved.

    Their extraction starts once the transaction is committed; the request does not wait for it.
    """
    if not uploads:
        raise UploadRefused(_("Choose at least one file."))
    prepared: list[tuple[str, bytes]] = []
    refused: list[str] = []
    for upload in uploads:
        try:
            prepared.append(_read(upload))
        except UploadRefused as e:
            refused.append(str(e))
    if not prepared:
        raise UploadRefused(" ".join(refused))
    stored: list[str] = []
    try:
        with transaction.atomic():
            documents = []
            for name, data in prepared:
                doc = Document(
                    knowledge_base=kb,
                    title=PurePath(name).stem[:300],
                    text="",
                    filename=name[:255],
                    size=len(data),
                    status=Document.PROCESSING,
                )
                doc.file.save(name, ContentFile(data), save=False)
                stored.append(doc.file.name or "")
                doc.save()
                documents.append(doc)
            ids = [doc.pk for doc in documents]
            transaction.on_commit(lambda: processing.enqueue(ids))
    except BaseException:
        # The rows are rolled back; the files written before the failure go too.
        for path in stored:
            if path:
                Document.file.field.storage.delete(path)
        raise
    return documents, refused


def delete_document(doc: Document) -> None:
    """Delete the row (its tables cascade), and its files once the deletion is committed."""
    tables = list(Table.objects.filter(document=doc).values_list("file", flat=True))
    _delete_with_files(doc, [doc.file.name or "", *tables])


def delete_base(kb: KnowledgeBase) -> int:
    """Delete a base and all its documents, then their files once the deletion is committed; how many documents.

    The full-text index follows the rows, as for one document: SQLite's delete trigger removes each
    document's FTS5 entry, and PostgreSQL's GIN index is on an expression of the rows themselves.
    """
    with transaction.atomic():
        # Locked first (PostgreSQL): an upload under way commits before, or finds the base gone after.
        list(KnowledgeBase.objects.select_for_update().filter(pk=kb.pk).values_list("pk", flat=True))
        paths = list(Document.objects.filter(knowledge_base=kb).values_list("file", flat=True))
        tables = list(Table.objects.filter(knowledge_base=kb).values_list("file", flat=True))
        _delete_with_files(kb, [*paths, *tables])
    return len(paths)


def _delete_with_files(row: Document | KnowledgeBase, paths: Sequence[str]) -> None:
    """Delete ``row`` (its documents cascade), and the stored files ``paths`` only once that is committed."""
    storage = Document.file.field.storage
    kept = [path for path in paths if path]
    with transaction.atomic():
        row.delete()
        if kept:
            transaction.on_commit(lambda: _remove(storage, kept))


def _remove(storage: Storage, paths: Sequence[str]) -> None:
    for path in paths:
        storage.delete(path)
