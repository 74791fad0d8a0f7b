"""Extracting an upload's text off the request, in a child process with limits.

An upload is saved ``processing``; once committed, ``enqueue`` hands it to the embedded default's
bounded pool (``KB_EXTRACT_WORKERS`` threads, each waiting on one child, by default the cores less one, the
children at a lower priority: the server keeps a core for its requests) or, scaled out
(``RUNS_EXECUTOR=celery``), to a Celery task (``workers.tasks.extract_document``, registered by the workers app). Either way ``process`` reads the
file through Django's storage (a shared ``MEDIA_ROOT`` or an object store), runs ``extract_child``
under CPU-time, memory and wall-time limits, and saves the document ``ready`` with its text, or
``failed`` with a failure code and its numbers. A document left processing by a stopped server is
failed by ``fail_stale`` (``recover_runs`` at start, and the documents list).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import close_old_connections, transaction
from django.utils import timezone

from .extract import Extracted, Limits
from .models import Document, KnowledgeBase, Table
from .tabular import TableData

log = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("extract_child.py")
ROOT = Path(__file__).resolve().parents[2]

# Failure codes of the process around the extraction (extract.py has those of the file itself).
CPU = "cpu"  # seconds
TIMEOUT = "timeout"  # seconds
MEMORY = "memory"  # limit_mb
CRASHED = "crashed"  # exit
INTERRUPTED = "interrupted"  # the server stopped while it was processing
UNREADABLE = "unreadable"  # the stored file could not be read
NOT_QUEUED = "not_queued"

OUT_OF_MEMORY = (b"MemoryError", b"failed to map segment", b"Cannot allocate memory")

# How much lower than the server's the priority of an extraction is: a page's request gets the core first.
NICE = 10


@dataclass(frozen=True, slots=True)
class Failure:
    code: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChildLimits:
    cpu_seconds: int
    wall_seconds: float
    memory_mb: int
    extract: Limits

    @classmethod
    def from_settings(cls) -> ChildLimits:
        return cls(
            cpu_seconds=settings.KB_EXTRACT_CPU_SECONDS,
            wall_seconds=settings.KB_EXTRACT_WALL_SECONDS,
            memory_mb=settings.KB_EXTRACT_MEMORY_MB,
            extract=Limits(
                max_pages=settings.KB_EXTRACT_MAX_PAGES,
                max_expanded_bytes=int(settings.KB_EXTRACT_MAX_EXPANDED_MB * 1024 * 1024),
                max_text_chars=settings.KB_EXTRACT_MAX_TEXT_CHARS,
                max_table_text_chars=settings.KB_TABLE_TEXT_CHARS,
            ),
        )


def run_child(name: str, data: bytes, limits: ChildLimits) -> Extracted | Failure:
    """Extract ``data`` in a fresh child process under ``limits``; its text and tables, or why not.

    The bytes go to the child in a memfd (read there as ``/dev/fd/N``, which DuckDB can seek in for Parquet).
    """
    fd = os.memfd_create("upload", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        return _run_child(name, fd, limits)
    finally:
        os.close(fd)


def _run_child(name: str, fd: int, limits: ChildLimits) -> Extracted | Failure:
    header = {
        "name": name,
        "fd": fd,
        "nice": NICE,
        "cpu_seconds": limits.cpu_seconds,
        "memory_mb": limits.memory_mb,
        "max_pages": limits.extract.max_pages,
        "max_expanded_bytes": limits.extract.max_expanded_bytes,
        "max_text_chars": limits.extract.max_text_chars,
        "max_table_text_chars": limits.extract.max_table_text_chars,
    }
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
    process = subprocess.Popen(
        [sys.executable, "-I", str(CHILD), str(ROOT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd="/",
        close_fds=True,
        pass_fds=(fd,),
        start_new_session=True,
    )
    try:
        out, err = process.communicate(json.dumps(header).encode() + b"\n", timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        _kill(process)
        process.communicate()
        return Failure(TIMEOUT, {"seconds": limits.wall_seconds})
    except BaseException:
        _kill(process)
        raise
    code = process.returncode
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        return Failure(CPU, {"seconds": limits.cpu_seconds})
    if code != 0:
        # Out of address space: Python's MemoryError, or a library that could not be mapped in.
        if any(sign in err for sign in OUT_OF_MEMORY):
            return Failure(MEMORY, {"limit_mb": limits.memory_mb})
        log.warning("extraction child of %s exited with %s: %s", name, code, err[-2000:].decode(errors="replace"))
        return Failure(CRASHED, {"exit": code})
    try:
        line, _, blobs = out.partition(b"\n")
        result = json.loads(line)
        if result["ok"]:
            tables, at = [], 0
            for t in result["tables"]:
                size = int(t["size"])
                parquet = blobs[at : at + size]
                if len(parquet) != size:
                    raise ValueError("a table's Parquet bytes are cut short")
                at += size
                columns = tuple((str(c), str(k)) for c, k in t["columns"])
                tables.append(TableData(str(t["sheet"]), columns, int(t["rows"]), parquet, str(t["text"])))
            return Extracted(title=str(result["title"]), text=str(result["text"]), tables=tuple(tables))
        return Failure(str(result["code"]), dict(result["params"]))
    except (ValueError, KeyError, TypeError):
        log.warning("extraction child of %s answered no result: %r", name, out[:200])
        return Failure(CRASHED, {"exit": code})


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def process(document_id: int) -> str | None:
    """Extract one processing document and save the outcome; its new status (None when it was not processing)."""
    doc = Document.objects.filter(pk=document_id, status=Document.PROCESSING).first()
    if doc is None:
        return None
    outcome: Extracted | Failure
    try:
        # Through the storage, never a local path: a shared MEDIA_ROOT or an object store.
        with doc.file.storage.open(doc.file.name, "rb") as f:
            data = f.read(int(settings.KB_MAX_UPLOAD_MB * 1024 * 1024) + 1)
    except Exception:
        log.exception("could not read the stored file of document %s", document_id)
        outcome = Failure(UNREADABLE)
    else:
        outcome = run_child(doc.filename or doc.file.name, data, ChildLimits.from_settings())
    return save_outcome(document_id, outcome)


def save_outcome(document_id: int, outcome: Extracted | Failure) -> str | None:
    """Save an extraction's outcome on a processing document: ready with its text and tables, or failed."""
    pending = Document.objects.filter(pk=document_id, status=Document.PROCESSING)
    if isinstance(outcome, Failure):
        status = Document.FAILED
        changed = pending.update(status=status, failure=outcome.code, failure_params=outcome.params)
        return status if changed else None
    if outcome.tables:
        return _save_tables(document_id, outcome)
    status = Document.READY
    fields: dict[str, Any] = {"status": status, "text": outcome.text, "failure": "", "failure_params": {}}
    if outcome.title:
        fields["title"] = outcome.title
    # Text and status in one statement: the full-text entry and "ready" come together.
    changed = pending.update(**fields)
    return status if changed else None


def _ident(text: str) -> str:
    """Lower-case ASCII letters, digits and underscores: a name a query can use without quotes."""
    import unicodedata

    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9]+", "_", folded)).strip("_")


def table_name(filename: str, sheet: str, taken: set[str]) -> str:
    """A readable name, unique among ``taken``: the file's name (``factures``), with the sheet (``ventes__feuil1``)."""
    base = _ident(Path(filename).stem)[:40] or "table"
    if base[0].isdigit():
        base = f"t_{base}"
    if sheet:
        base = f"{base}__{_ident(sheet)[:30] or 'sheet'}"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def _text(names: list[str], tables: tuple[TableData, ...]) -> str:
    """The document's text: each table's name, columns and row count, then its rows (as the child rendered them)."""
    parts = []
    for name, t in zip(names, tables, strict=True):
        columns = ", ".join(f"{c} ({k})" for c, k in t.columns)
        sheet = f" (sheet {t.sheet})" if t.sheet else ""
        parts.append(f"Table {name}{sheet}: {t.row_count} rows; columns: {columns}.\n{t.text}")
    return "\n\n".join(parts)


def _save_tables(document_id: int, outcome: Extracted) -> str | None:
    """The document ready with its tables: their Parquet files saved first, then the rows in one transaction."""
    doc = Document.objects.filter(pk=document_id, status=Document.PROCESSING).first()
    if doc is None:
        return None
    storage = Table.file.field.storage
    files = [
        storage.save(f"kb/{doc.knowledge_base_id}/tables/{uuid.uuid4().hex}.parquet", ContentFile(t.parquet))
        for t in outcome.tables
    ]
    try:
        with transaction.atomic():
            # The base locked (PostgreSQL): two documents of one base extracted at once get different names.
            list(KnowledgeBase.objects.select_for_update().filter(pk=doc.knowledge_base_id).values_list("pk"))
            taken = set(Table.objects.filter(knowledge_base_id=doc.knowledge_base_id).values_list("name", flat=True))
            names = [table_name(doc.filename or doc.title, t.sheet, taken) for t in outcome.tables]
            fields: dict[str, Any] = {
                "status": Document.READY,
                "text": _text(names, outcome.tables),
                "failure": "",
                "failure_params": {},
            }
            if outcome.title:
                fields["title"] = outcome.title
            if not Document.objects.filter(pk=document_id, status=Document.PROCESSING).update(**fields):
                raise _Gone
            Table.objects.bulk_create(
                Table(
                    knowledge_base_id=doc.knowledge_base_id,
                    document_id=document_id,
                    name=name,
                    sheet=t.sheet[:200],
                    columns=[list(c) for c in t.columns],
                    row_count=t.row_count,
                    file=path,
                )
                for name, t, path in zip(names, outcome.tables, files, strict=True)
            )
    except BaseException as e:
        for path in files:
            storage.delete(path)
        if isinstance(e, _Gone):
            return None
        raise
    return Document.READY


class _Gone(Exception):
    """The document was deleted, or failed, while it was being extracted."""


def fail(document_ids: Iterable[int], code: str, params: dict[str, Any] | None = None) -> int:
    return Document.objects.filter(pk__in=list(document_ids), status=Document.PROCESSING).update(
        status=Document.FAILED, failure=code, failure_params=params or {}
    )


def fail_stale(older_than_seconds: float | None = None) -> int:
    """Fail the documents processing for longer than that (all of them with None); how many."""
    stale = Document.objects.filter(status=Document.PROCESSING)
    if older_than_seconds is not None:
        stale = stale.filter(created__lt=timezone.now() - timedelta(seconds=older_than_seconds))
    return stale.update(status=Document.FAILED, failure=INTERRUPTED, failure_params={})


# The embedded default's pool: at most KB_EXTRACT_WORKERS extractions at once, the rest wait their turn.
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, settings.KB_EXTRACT_WORKERS), thread_name_prefix="extract")
        return _pool


def _process_in_pool(document_id: int) -> None:
    close_old_connections()
    try:
        process(document_id)
    except Exception:
        log.exception("extraction of document %s failed", document_id)
        fail([document_id], CRASHED, {"exit": None})
    finally:
        close_old_connections()


_queue: Callable[[int], None] | None = None


def register_queue(queue: Callable[[int], None]) -> None:
    """Scaled out, the ``workers`` app hands extractions to Celery through this (``knowledge`` does not import it)."""
    global _queue
    _queue = queue


def enqueue(document_ids: Iterable[int]) -> list[Future[None]]:
    """Start extracting these documents off the request (call once they are committed)."""
    ids = list(document_ids)
    if settings.RUNS_EXECUTOR == "celery":
        for pk in ids:
            try:
                if _queue is None:
                    raise RuntimeError("no Celery queue registered for extractions")
                _queue(pk)
            except Exception:
                log.exception("could not queue the extraction of document %s", pk)
                fail([pk], NOT_QUEUED)
        return []
    pool = _executor()
    return [pool.submit(_process_in_pool, pk) for pk in ids]
