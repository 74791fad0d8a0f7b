"""The extraction child: ``python -I extract_child.py ROOT``, started by ``processing.run_child``.

Its limits are set before anything of the file is read: address space (``RLIMIT_AS``), CPU time
(``RLIMIT_CPU``: SIGXCPU at the limit, SIGKILL a second later), no file written, no core dump. The
parent kills it at the wall-time limit. Standard input: one JSON line (file name, limits), then the
file's bytes; standard output: one JSON object, ``{"ok": true, "title", "text"}`` or
``{"ok": false, "code", "params"}``.
"""

from __future__ import annotations

import json
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
    cpu = int(header["cpu_seconds"])
    _limit(resource.RLIMIT_CPU, cpu)
    _limit(resource.RLIMIT_AS, int(header["memory_mb"]) * 1024 * 1024)
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_CORE, 0)
    data = stdin.read()
    sys.path.insert(0, sys.argv[1])
    from assistant.knowledge.extract import ExtractionError, Limits, extract

    limits = Limits(
        max_pages=int(header["max_pages"]),
        max_expanded_bytes=int(header["max_expanded_bytes"]),
        max_text_chars=int(header["max_text_chars"]),
    )
    try:
        extracted = extract(str(header["name"]), data, limits)
        out: dict[str, object] = {"ok": True, "title": extracted.title, "text": extracted.text}
    except ExtractionError as e:
        out = {"ok": False, "code": e.code, "params": e.params}
    except MemoryError:
        out = {"ok": False, "code": "memory", "params": {"limit_mb": int(header["memory_mb"])}}
    del data
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
