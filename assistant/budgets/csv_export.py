"""The usage CSV as its download sends it: built by a worker process at a lower priority, off the server's interpreter.

A month's CSV is Python work of about a second of CPU on a loaded machine (tens of thousands of lines: the database's
rows as Django converts them, each line's figures, the writer), which held the interpreter (the GIL) the server's
other requests need: another user's pages waited on it, a p95 about twice their own (docs/BENCHMARKS.md, issue 34).
Built by ``csv_child`` (a process of its own, ``nice`` ``CSV_NICE``), it costs the server's process only the
reading of its bytes, and the cores go to the pages first.

The worker is started by the first CSV (or ahead, by the usage page: ``prepare``) and kept for the next ones: setting
Django up costs seconds of CPU (the apps and their libraries; about 160 MB while it is kept), a month's CSV a second
at most. It leaves after ``CSV_WORKER_IDLE_SECONDS`` without a CSV (its memory freed), with the server, or when it
fails (the next CSV starts another). One CSV at a time: a second waits for the first. It reads the database the request reads; it cannot where another connection
would not see the same rows (an in-memory SQLite database, a request inside a transaction, as in a test): the CSV is
then built in the server's process, as it is when the worker fails.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from datetime import date
from pathlib import Path
from typing import Any

from django.db import connections, router

from assistant.orgs.models import Organisation
from assistant.runs.models import Run

from .usage_csv import usage_csv

log = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("csv_child.py")
ROOT = Path(__file__).resolve().parents[2]
CSV_NICE = 10
"""How much lower than the server's the worker's priority is (as a document's extraction): a page gets a core first."""
CSV_SECONDS = 600.0
"""A CSV's wall time at most, the worker's start included (then the worker is stopped, the CSV built in the
process)."""
CSV_WORKER_IDLE_SECONDS = 600.0
"""How long the worker waits for the next CSV before it leaves."""


def usage_csv_download(org: Organisation, month: date) -> bytes:
    """The usage CSV of ``org``'s ``month`` (``usage_csv``, UTF-8), built by the worker where it reads the same
    rows, else here."""
    if _shared():
        made = csv_from_child(org, month)
        if made is not None:
            return made
    return usage_csv(org, month).encode()


def prepare() -> None:
    """The worker started, when none is kept, for the CSV the reader of the usage page may ask for next: its start
    takes seconds (Django set up), then waits for it. Nothing when a CSV is being made, or where the worker would not
    read the same rows."""
    if not _shared() or not _lock.acquire(blocking=False):
        return
    try:
        _worker(_child_database(connections[router.db_for_read(Run)].settings_dict))
    finally:
        _lock.release()


def _shared() -> bool:
    """Whether another process reads the rows the request reads: not an in-memory SQLite database, nor inside a
    transaction (whose rows no other connection sees until it commits)."""
    connection = connections[router.db_for_read(Run)]
    name = str(connection.settings_dict["NAME"])
    in_memory = connection.vendor == "sqlite" and (name == ":memory:" or "mode=memory" in name)
    return not connection.in_atomic_block and not in_memory


def csv_from_child(org: Organisation, month: date) -> bytes | None:
    """The CSV as the worker wrote it, from the database the runs are read from (its committed rows); None (logged)
    when it failed or took over ``CSV_SECONDS``."""
    database = _child_database(connections[router.db_for_read(Run)].settings_dict)
    job = json.dumps({"organisation": org.pk, "month": month.isoformat()}).encode() + b"\n"
    with _lock:
        worker, fresh = _worker(database)
        data = worker.ask(job)
        if data is None and not fresh and not worker.failed and not worker.expired:
            # A worker kept from before that has just left (idle) or died: once more, with a new one.
            _stop()
            worker, fresh = _worker(database)
            data = worker.ask(job)
        if data is None and not worker.failed:  # its error is in the log when it answered that it failed
            log.warning("the usage CSV's worker stopped (expired: %s); the CSV is built in the process", worker.expired)
            _stop()
        return data


def _child_database(settings_dict: dict[str, Any]) -> dict[str, Any]:
    """The request's database settings for the worker's one connection: no pool, closed after each CSV."""
    database = {key: value for key, value in settings_dict.items() if key != "TEST"}
    options = dict(database.get("OPTIONS") or {})
    options.pop("pool", None)
    database["OPTIONS"] = options
    database["CONN_MAX_AGE"] = 0
    return database


class _Worker:
    """The worker process and its database."""

    def __init__(self, database: dict[str, Any]) -> None:
        self.key = _key(database)
        self.failed = False  # it answered that the last CSV failed
        self.expired = False  # stopped at CSV_SECONDS
        self.ready = False
        header = {"database": database, "nice": CSV_NICE, "idle_seconds": CSV_WORKER_IDLE_SECONDS}
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), str(ROOT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            close_fds=True,
            start_new_session=True,  # not stopped by the terminal's Ctrl-C before the server: it leaves with it
        )
        self._send(json.dumps(header, default=str).encode() + b"\n")

    def ask(self, job: bytes) -> bytes | None:
        """The CSV the worker wrote for ``job`` within ``CSV_SECONDS`` (its start included); None when it failed
        (``failed``), is gone, or took too long (``expired``)."""
        self.failed = False
        timer = threading.Timer(CSV_SECONDS, self._expire)
        timer.start()
        try:
            return self._ask(job)
        finally:
            timer.cancel()

    def _ask(self, job: bytes) -> bytes | None:
        assert self.process.stdout is not None
        if not self.ready:
            if self.process.stdout.readline() != b"ready\n":
                return None
            self.ready = True
        if not self._send(job):
            return None
        status, _, size = self.process.stdout.readline().strip().partition(b" ")
        if status != b"ok":
            self.failed = status == b"failed"
            return None
        data = self.process.stdout.read(int(size))
        return data if len(data) == int(size) else None

    def _send(self, data: bytes) -> bool:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except OSError:  # it left
            return False
        return True

    def _expire(self) -> None:
        self.expired = True
        self.stop()

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


def _key(database: dict[str, Any]) -> str:
    return json.dumps(database, sort_keys=True, default=str)


_lock = threading.Lock()
_kept: _Worker | None = None


def _worker(database: dict[str, Any]) -> tuple[_Worker, bool]:
    """The worker kept for ``database``, or a new one (True): one is kept at a time."""
    global _kept
    if _kept is not None and _kept.key == _key(database) and _kept.alive():
        return _kept, False
    _stop()
    _kept = _Worker(database)
    return _kept, True


def _stop() -> None:
    global _kept
    if _kept is not None:
        _kept.stop()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            _kept.process.communicate(timeout=10)
        _kept = None


# The server's end closes the worker's input, which it leaves on; here it is stopped and waited for first.
atexit.register(_stop)
