"""Adding documents to a knowledge base from uploaded files, and removing them: all or nothing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils.translation import gettext as _

from .extract import SUPPORTED, Extracted, ExtractionError, extension, extract
from .models import Document, KnowledgeBase


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


def add_documents(kb: KnowledgeBase, uploads: Sequence[UploadedFile]) -> list[Document]:
    """Extract every file first, then save them all in one transaction; on any failure nothing stays."""
    if not uploads:
        raise UploadRefused(_("Choose at least one file."))
    prepared: list[tuple[str, bytes, Extracted]] = []
    for upload in uploads:
        name, data = _read(upload)
        try:
            prepared.append((name, data, extract(name, data)))
        except ExtractionError as e:
            raise UploadRefused(str(e)) from e
    stored: list[str] = []
    try:
        with transaction.atomic():
            documents = []
            for name, data, extracted in prepared:
                doc = Document(
                    knowledge_base=kb,
                    title=extracted.title or PurePath(name).stem[:300],
                    text=extracted.text,
                    filename=name[:255],
                    size=len(data),
                )
                doc.file.save(name, ContentFile(data), save=False)
                stored.append(doc.file.name or "")
                doc.save()
                documents.append(doc)
    except BaseException:
        # The rows are rolled back; the files written before the failure go too.
        for path in stored:
            if path:
                Document.file.field.storage.delete(path)
        raise
    return documents


def delete_document(doc: Document) -> None:
    """Delete the row, and its file once the deletion is committed."""
    path = doc.file.name
    storage = doc.file.storage
    with transaction.atomic():
        doc.delete()
        if path:
            transaction.on_commit(lambda: storage.delete(path))
