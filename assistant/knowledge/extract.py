"""The text of an uploaded file: .txt, .md, .pdf (pypdf), .docx (python-docx), .html (trafilatura); and the
tables of a .csv, .xlsx or .parquet file (``tabular``: DuckDB and openpyxl), whose rows are its text too.

This module runs in the extraction child (``extract_child``), under its CPU-time and memory limits,
and imports nothing of Django: ``extract`` either returns the title and text, or raises
``ExtractionError`` with a failure code and its numbers, which the pages word in the reader's language
(``templates/knowledge/_failure.html``).

What a file expands to cannot be known before it is decoded, so it is capped while decoding
(``Limits``): a running count of decompressed bytes (the zip entries of a .docx, read through a
counting reader that does not trust the sizes the archive declares, an .xlsx's too; the PDF streams,
through pypdf's own output limits and the decoded content of each page; DuckDB's tables, through its
memory limit), of extracted characters, and of pages.

A new format is one function ``(data, limits, path) -> (title, text)`` (or an ``Extracted``, for tables)
in ``EXTRACTORS``; ``path`` is where the file can be read from again (``/dev/fd/N`` in the child), or None.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tabular import TableData

# The shared primitives, kept importable from here.
from .decoding import (
    CHUNK,
    CORRUPT,
    EXPANDED,
    MAX_ZIP_ENTRIES,
    NO_TEXT,
    NOT_TEXT,
    NOT_UTF8,
    PROTECTED,
    TEXT_TOO_LONG,
    TOO_MANY_COLUMNS,
    TOO_MANY_PAGES,
    TOO_MANY_PARTS,
    Budget,
    ExtractionError,
    Limits,
    expanded_budget,
    read_zip,
    text_budget,
)


@dataclass(frozen=True, slots=True)
class Extracted:
    title: str
    text: str
    tables: tuple[TableData, ...] = ()


def extension(name: str) -> str:
    return PurePath(name).suffix.lower()


def _plain(data: bytes, limits: Limits, path: str | None = None) -> tuple[str, str]:
    if b"\x00" in data[:8192]:
        raise ExtractionError(NOT_TEXT)
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return "", data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise ExtractionError(NOT_UTF8)


def _pdf(data: bytes, limits: Limits, path: str | None = None) -> tuple[str, str]:
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


def _docx(data: bytes, limits: Limits, path: str | None = None) -> tuple[str, str]:
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


def _html(data: bytes, limits: Limits, path: str | None = None) -> tuple[str, str]:
    from assistant.engine.web import html_to_text

    try:
        return html_to_text(data)
    except MemoryError:
        raise
    except Exception as e:  # lxml and trafilatura raise several kinds of errors on broken markup
        raise ExtractionError(CORRUPT, kind="html") from e


def _csv(data: bytes, limits: Limits, path: str | None = None) -> Extracted:
    from .tabular import read_csv, table_text

    tables = read_csv(data, limits)
    return Extracted(title="", text=table_text(tables), tables=tuple(tables))


def _xlsx(data: bytes, limits: Limits, path: str | None = None) -> Extracted:
    from .tabular import read_xlsx, table_text

    title, tables = read_xlsx(data, limits)
    return Extracted(title=title, text=table_text(tables), tables=tuple(tables))


def _parquet(data: bytes, limits: Limits, path: str | None = None) -> Extracted:
    """DuckDB reads a Parquet file by seeking in it: from ``path`` (the child's memfd), else from one made here."""
    import os

    from .tabular import read_parquet, table_text

    if data[:4] != b"PAR1":
        raise ExtractionError(CORRUPT, kind="parquet")
    if path is not None:
        tables = read_parquet(path, limits)
    else:
        fd = os.memfd_create("upload", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            tables = read_parquet(f"/proc/self/fd/{fd}", limits)
        finally:
            os.close(fd)
    return Extracted(title="", text=table_text(tables), tables=tuple(tables))


Extractor = Callable[[bytes, Limits, str | None], tuple[str, str] | Extracted]

EXTRACTORS: dict[str, Extractor] = {
    ".txt": _plain,
    ".md": _plain,
    ".markdown": _plain,
    ".pdf": _pdf,
    ".docx": _docx,
    ".html": _html,
    ".htm": _html,
    ".csv": _csv,
    ".xlsx": _xlsx,
    ".parquet": _parquet,
}
TABLES = (".csv", ".xlsx", ".parquet")
SUPPORTED = tuple(EXTRACTORS)


def extract(name: str, data: bytes, limits: Limits | None = None, path: str | None = None) -> Extracted:
    """Title (from the file's metadata when it has one), text and tables of the file ``name``, within ``limits``.

    ``path``, when given, reads the same bytes again (the child's ``/dev/fd/N``): a Parquet file is read there.
    """
    limits = limits or Limits()
    extractor = EXTRACTORS.get(extension(name))
    if extractor is None:
        raise ExtractionError("unsupported")
    result = extractor(data, limits, path)
    tables: tuple[TableData, ...] = ()
    if isinstance(result, Extracted):
        title, text, tables = result.title, result.text, result.tables
    else:
        title, text = result
    text = text.replace("\x00", "").strip()
    if not text:
        raise ExtractionError(NO_TEXT)
    if len(text) > limits.max_text_chars:
        raise ExtractionError(TEXT_TOO_LONG, limit=limits.max_text_chars)
    # No NUL in a title either (PostgreSQL refuses it in text; a PDF's metadata may hold one).
    return Extracted(title=" ".join(title.replace("\x00", " ").split())[:300], text=text, tables=tables)


__all__ = [
    "CHUNK",
    "CORRUPT",
    "EXPANDED",
    "EXTRACTORS",
    "MAX_ZIP_ENTRIES",
    "NOT_TEXT",
    "NOT_UTF8",
    "NO_TEXT",
    "PROTECTED",
    "SUPPORTED",
    "TABLES",
    "TEXT_TOO_LONG",
    "TOO_MANY_COLUMNS",
    "TOO_MANY_PAGES",
    "TOO_MANY_PARTS",
    "Budget",
    "Extracted",
    "ExtractionError",
    "Limits",
    "expanded_budget",
    "extension",
    "extract",
    "read_zip",
    "text_budget",
]
