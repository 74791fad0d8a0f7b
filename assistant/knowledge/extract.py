"""The text of an uploaded file: .txt, .md, .pdf (pypdf), .docx (python-docx), .html (trafilatura).

This module runs in the extraction child (``extract_child``), under its CPU-time and memory limits,
and imports nothing of Django: ``extract`` either returns the title and text, or raises
``ExtractionError`` with a failure code and its numbers, which the pages word in the reader's language
(``templates/knowledge/_failure.html``).

What a file expands to cannot be known before it is decoded, so it is capped while decoding
(``Limits``): a running count of decompressed bytes (the zip entries of a .docx, read through a
counting reader that does not trust the sizes the archive declares; the PDF streams, through pypdf's
own output limits and the decoded content of each page), of extracted characters, and of pages.

A new format is one function ``(data, limits) -> (title, text)`` in ``EXTRACTORS``.
"""

from __future__ import annotations

import io
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

# Failure codes (``Document.failure``); their numbers are in ``ExtractionError.params``.
CORRUPT = "corrupt"  # kind: pdf, docx, html
NOT_TEXT = "not_text"
NOT_UTF8 = "not_utf8"
NO_TEXT = "no_text"
PROTECTED = "protected"
EXPANDED = "expanded"  # limit_mb: more than that much data once decompressed
TEXT_TOO_LONG = "text_too_long"  # limit: characters
TOO_MANY_PAGES = "too_many_pages"  # pages, limit
TOO_MANY_PARTS = "too_many_parts"  # parts, limit: entries of a zip-based file

MAX_ZIP_ENTRIES = 10_000
CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """The caps of one extraction (settings ``KB_EXTRACT_*``)."""

    max_pages: int = 2000
    max_expanded_bytes: int = 50 * 1024 * 1024
    max_text_chars: int = 10_000_000

    @property
    def max_expanded_mb(self) -> float:
        mb = round(self.max_expanded_bytes / 1024 / 1024, 1)
        return int(mb) if mb == int(mb) else mb


class ExtractionError(Exception):
    """The file cannot be read as a document: ``code`` says why, ``params`` holds the numbers."""

    def __init__(self, code: str, **params: Any) -> None:
        super().__init__(code, params)
        self.code = code
        self.params = params


@dataclass(frozen=True, slots=True)
class Extracted:
    title: str
    text: str


class Budget:
    """A running count that fails the extraction as soon as it passes its limit."""

    def __init__(self, limit: int, error: Callable[[], ExtractionError]) -> None:
        self.limit = limit
        self.used = 0
        self._error = error

    def add(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise self._error()


def expanded_budget(limits: Limits) -> Budget:
    return Budget(limits.max_expanded_bytes, lambda: ExtractionError(EXPANDED, limit_mb=limits.max_expanded_mb))


def text_budget(limits: Limits) -> Budget:
    return Budget(limits.max_text_chars, lambda: ExtractionError(TEXT_TOO_LONG, limit=limits.max_text_chars))


def extension(name: str) -> str:
    return PurePath(name).suffix.lower()


def read_zip(data: bytes, budget: Budget, kind: str) -> dict[str, bytes]:
    """Every entry of a zip archive, decompressed through a counting reader that stops past ``budget``.

    The sizes an archive declares are not trusted: the bytes actually decompressed are counted, chunk by
    chunk, across all entries. For .docx today, .xlsx tomorrow; ``kind`` names the format when it is corrupt.
    """
    parts: dict[str, bytes] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_ZIP_ENTRIES:
                raise ExtractionError(TOO_MANY_PARTS, parts=len(infos), limit=MAX_ZIP_ENTRIES)
            for info in infos:
                chunks = []
                with archive.open(info) as member:
                    while chunk := member.read(CHUNK):
                        budget.add(len(chunk))
                        chunks.append(chunk)
                parts[info.filename] = b"".join(chunks)
    except ExtractionError:
        raise
    except Exception as e:  # a broken zip, a bad CRC, an unsupported compression
        raise ExtractionError(CORRUPT, kind=kind) from e
    return parts


def _plain(data: bytes, limits: Limits) -> tuple[str, str]:
    if b"\x00" in data[:8192]:
        raise ExtractionError(NOT_TEXT)
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return "", data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise ExtractionError(NOT_UTF8)


def _pdf(data: bytes, limits: Limits) -> tuple[str, str]:
    from pypdf import PdfReader, apply_configuration
    from pypdf.errors import LimitReachedError

    cap = limits.max_expanded_bytes
    expanded, chars = expanded_budget(limits), text_budget(limits)
    pages: list[str] = []
    try:
        # pypdf's own limits, at ours: no stream decodes to more than the cap.
        with (
            warnings.catch_warnings(),
            apply_configuration(
                zlib_maximum_output_length=cap,
                lzw_maximum_output_length=cap,
                run_length_maximum_output_length=cap,
                brotli_maximum_output_length=cap,
                jbig2_maximum_output_length=cap,
                array_based_stream_maximum_output_length=cap,
                image_maximum_buffer_size=cap,
                stream_decoding_work_maximum_length=cap * 4,
            ),
        ):
            warnings.simplefilter("ignore")
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted and not reader.decrypt(""):
                raise ExtractionError(PROTECTED)
            count = len(reader.pages)
            if count > limits.max_pages:
                raise ExtractionError(TOO_MANY_PAGES, pages=count, limit=limits.max_pages)
            for page in reader.pages:
                # The page's decoded content counts, once per page that shows it (pages may share a stream).
                contents = page.get_contents()
                if contents is not None:
                    expanded.add(len(contents.get_data()))
                text = (page.extract_text() or "").strip()
                chars.add(len(text))
                pages.append(text)
            title = str(reader.metadata.title or "") if reader.metadata else ""
    except ExtractionError:
        raise
    except LimitReachedError as e:
        raise ExtractionError(EXPANDED, limit_mb=limits.max_expanded_mb) from e
    except MemoryError:
        raise
    except Exception as e:  # pypdf raises many kinds of errors on a damaged file
        raise ExtractionError(CORRUPT, kind="pdf") from e
    return title, "\n\n".join(p for p in pages if p)


def _docx(data: bytes, limits: Limits) -> tuple[str, str]:
    import docx

    # Decompressed first through the counting reader: python-docx then reads parts known to fit.
    read_zip(data, expanded_budget(limits), "docx")
    chars = text_budget(limits)
    try:
        document = docx.Document(io.BytesIO(data))
        parts = []
        for p in document.paragraphs:
            chars.add(len(p.text))
            parts.append(p.text)
        for table in document.tables:
            for row in table.rows:
                line = " | ".join(cell.text.strip() for cell in row.cells)
                chars.add(len(line))
                parts.append(line)
        title = document.core_properties.title or ""
    except ExtractionError:
        raise
    except MemoryError:
        raise
    except Exception as e:  # a missing part, bad XML
        raise ExtractionError(CORRUPT, kind="docx") from e
    return title, "\n".join(p for p in parts if p.strip())


def _html(data: bytes, limits: Limits) -> tuple[str, str]:
    from assistant.engine.web import html_to_text

    try:
        return html_to_text(data)
    except MemoryError:
        raise
    except Exception as e:  # lxml and trafilatura raise several kinds of errors on broken markup
        raise ExtractionError(CORRUPT, kind="html") from e


EXTRACTORS: dict[str, Callable[[bytes, Limits], tuple[str, str]]] = {
    ".txt": _plain,
    ".md": _plain,
    ".markdown": _plain,
    ".pdf": _pdf,
    ".docx": _docx,
    ".html": _html,
    ".htm": _html,
}
SUPPORTED = tuple(EXTRACTORS)


def extract(name: str, data: bytes, limits: Limits | None = None) -> Extracted:
    """Title (from the file's metadata when it has one) and text of the file ``name``, within ``limits``."""
    limits = limits or Limits()
    extractor = EXTRACTORS.get(extension(name))
    if extractor is None:
        raise ExtractionError("unsupported")
    title, text = extractor(data, limits)
    text = text.replace("\x00", "").strip()
    if not text:
        raise ExtractionError(NO_TEXT)
    if len(text) > limits.max_text_chars:
        raise ExtractionError(TEXT_TOO_LONG, limit=limits.max_text_chars)
    # No NUL in a title either (PostgreSQL refuses it in text; a PDF's metadata may hold one).
    return Extracted(title=" ".join(title.replace("\x00", " ").split())[:300], text=text)
