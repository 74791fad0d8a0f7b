"""The text of an uploaded file: .txt, .md, .pdf (pypdf), .docx (python-docx), .html (trafilatura).

``extract`` either returns the title and text, or raises ``ExtractionError`` with a message the
user can act on (unsupported type, corrupt file, no text, protected PDF).
"""

from __future__ import annotations

import io
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import PurePath

from django.utils.translation import gettext as _

from assistant.engine.web import html_to_text

SUPPORTED = (".txt", ".md", ".markdown", ".pdf", ".docx", ".html", ".htm")
MAX_TEXT_CHARS = 10_000_000
MAX_DOCX_UNCOMPRESSED = 200 * 1024 * 1024


class ExtractionError(Exception):
    """The file cannot be read as a document; the message says why, for the user."""


@dataclass(frozen=True, slots=True)
class Extracted:
    title: str
    text: str


def extension(name: str) -> str:
    return PurePath(name).suffix.lower()


def extract(name: str, data: bytes) -> Extracted:
    """Title (from the file's metadata when it has one) and text of the file ``name``."""
    ext = extension(name)
    if ext not in SUPPORTED:
        raise ExtractionError(
            _("%(name)s: this type of file is not supported (supported: %(types)s).")
            % {"name": name, "types": ", ".join(SUPPORTED)}
        )
    if ext in (".txt", ".md", ".markdown"):
        title, text = "", _decode(name, data)
    elif ext == ".pdf":
        title, text = _pdf(name, data)
    elif ext == ".docx":
        title, text = _docx(name, data)
    else:
        title, text = _html(name, data)
    text = text.replace("\x00", "").strip()
    if not text:
        raise ExtractionError(
            _("%(name)s: no text could be found in it (a scanned PDF, for instance, has no text layer).")
            % {"name": name}
        )
    if len(text) > MAX_TEXT_CHARS:
        raise ExtractionError(
            _("%(name)s: its text is too long to be searched; split it into smaller files.") % {"name": name}
        )
    # No NUL in a title either (PostgreSQL refuses it in text; a PDF's metadata may hold one).
    return Extracted(title=" ".join(title.replace("\x00", " ").split())[:300], text=text)


def _corrupt(name: str, kind: str) -> ExtractionError:
    return ExtractionError(
        _("%(name)s could not be read as %(kind)s: the file seems corrupt.") % {"name": name, "kind": kind}
    )


def _decode(name: str, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise ExtractionError(_("%(name)s is not a text file.") % {"name": name})
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise ExtractionError(_("%(name)s is not UTF-8 text.") % {"name": name})


def _pdf(name: str, data: bytes) -> tuple[str, str]:
    from pypdf import PdfReader

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted and not reader.decrypt(""):
                raise ExtractionError(_("%(name)s is protected by a password.") % {"name": name})
            pages = [page.extract_text() or "" for page in reader.pages]
            title = str(reader.metadata.title or "") if reader.metadata else ""
    except ExtractionError:
        raise
    except Exception as e:  # pypdf raises many kinds of errors on a damaged file
        raise _corrupt(name, _("a PDF")) from e
    return title, "\n\n".join(p.strip() for p in pages if p.strip())


def _docx(name: str, data: bytes) -> tuple[str, str]:
    import docx

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if sum(info.file_size for info in archive.infolist()) > MAX_DOCX_UNCOMPRESSED:
                raise ExtractionError(_("%(name)s expands to too much data to be read.") % {"name": name})
        document = docx.Document(io.BytesIO(data))
        parts = [p.text for p in document.paragraphs]
        for table in document.tables:
            for row in table.rows:
                parts.append(" | ".join(cell.text.strip() for cell in row.cells))
        title = document.core_properties.title or ""
    except ExtractionError:
        raise
    except Exception as e:  # a broken zip, a missing part, bad XML
        raise _corrupt(name, _("a Word document (.docx)")) from e
    return title, "\n".join(p for p in parts if p.strip())


def _html(name: str, data: bytes) -> tuple[str, str]:
    try:
        return html_to_text(data)
    except Exception as e:  # lxml and trafilatura raise several kinds of errors on broken markup
        raise _corrupt(name, _("an HTML page")) from e
