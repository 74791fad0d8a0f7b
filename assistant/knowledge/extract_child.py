"""The extraction child: ``python -I extract_child.py ROOT``, started by ``processing.run_child``.

Its priority is lowered first (``nice``: the server's requests come before an extraction when they compete for
the cores), and its limits are set before anything of the file is read: address space (``RLIMIT_AS``), CPU time
(``RLIMIT_CPU``: SIGXCPU at the limit, SIGKILL a second later), no file written, no core dump. The
parent kills it at the wall-time limit. Standard input: one JSON line (file name, limits, and ``fd``,
the memfd the parent filled with the file's bytes and handed over, read here through ``/dev/fd/N``).
Standard output: one JSON line, ``{"ok": true, "title", "text", "tables"}`` or ``{"ok": false, "code",
"params"}``, then the Parquet bytes of each table, one after the other (``tables`` gives their sizes).
"""

from __future__ import annotations

import json
import os
import resource
import sys


def _limit(kind: int, value: int) -> None:
    """Soft limit ``value`` (never above the hard one); the hard one too, a second later for CPU time."""
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    top = value + 1 if kind == resource.RLIMIT_CPU else value
    if hard != resource.RLIM_INFINITY:
        top = min(top, hard)
    resource.setrlimit(kind, (value, top))


def main() -> None:
    stdin = sys.stdin.buffer
    header = json.loads(stdin.readline())
    os.nice(int(header["nice"]))
    cpu = int(header["cpu_seconds"])
    _limit(resource.RLIMIT_CPU, cpu)
    _limit(resource.RLIMIT_AS, int(header["memory_mb"]) * 1024 * 1024)
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_CORE, 0)
    fd = int(header["fd"])
    path = f"/dev/fd/{fd}"
    with open(path, "rb") as f:
        data = f.read()
    sys.path.insert(0, sys.argv[1])
    from assistant.knowledge.extract import ExtractionError, Limits, extract

    limits = Limits(
        max_pages=int(header["max_pages"]),
        max_expanded_bytes=int(header["max_expanded_bytes"]),
        max_text_chars=int(header["max_text_chars"]),
        max_table_text_chars=int(header["max_table_text_chars"]),
    )
    blobs: list[bytes] = []
    try:
        extracted = extract(str(header["name"]), data, limits, path)
        tables = [
            {"sheet": t.sheet, "columns": t.columns, "rows": t.row_count, "text": t.text, "size": len(t.parquet)}
            for t in extracted.tables
        ]
        blobs = [t.parquet for t in extracted.tables]
        out: dict[str, object] = {"ok": True, "title": extracted.title, "text": extracted.text, "tables": tables}
    except ExtractionError as e:
        out = {"ok": False, "code": e.code, "params": e.params}
    except MemoryError:
        out = {"ok": False, "code": "memory", "params": {"limit_mb": int(header["memory_mb"])}}
    del data
    os.close(fd)
    stdout = sys.stdout.buffer
    stdout.write(json.dumps(out).encode() + b"\n")
    for blob in blobs:
        stdout.write(blob)
    stdout.flush()


if __name__ == "__main__":
    main()
