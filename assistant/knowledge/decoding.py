"""What every extraction shares: the failure codes, the limits, ``ExtractionError``, running counts, and the
zip reader that counts what it decompresses. No Django; ``extract`` and ``tabular`` build on it."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Failure codes (``Document.failure``); their numbers are in ``ExtractionError.params``.
CORRUPT = "corrupt"  # kind: pdf, docx, html, csv, xlsx, parquet
NOT_TEXT = "not_text"
NOT_UTF8 = "not_utf8"
NO_TEXT = "no_text"
PROTECTED = "protected"
EXPANDED = "expanded"  # limit_mb: more than that much data once decompressed
TEXT_TOO_LONG = "text_too_long"  # limit: characters
TOO_MANY_PAGES = "too_many_pages"  # pages, limit
TOO_MANY_PARTS = "too_many_parts"  # parts, limit: entries of a zip-based file
TOO_MANY_COLUMNS = "too_many_columns"  # columns, limit: of a table

MAX_ZIP_ENTRIES = 10_000
CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """The caps of one extraction (settings ``KB_EXTRACT_*``)."""

    max_pages: int = 2000
    max_expanded_bytes: int = 50 * 1024 * 1024
    max_text_chars: int = 10_000_000
    max_table_text_chars: int = 200_000
    """Of a table document's text: its rows, rendered for the full-text index, stop there (the table is whole)."""

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
