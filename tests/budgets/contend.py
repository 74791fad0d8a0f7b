"""Many threads or processes contending for one category's budget, each with its own database connection.

``test_reservation`` runs it in a child process against a copy of the test database in a file
(SQLite as the server runs it: WAL and a busy timeout) or against the PostgreSQL test database
(DATABASE_URL), so that the contention is real: separate connections, separate processes.

    python contend.py threads   --category ID --workers 20 --tokens 1000 [--varied]
    python contend.py processes --category ID --workers 20 --processes 4 --tokens 1000 [--varied]

Each prints one JSON object: the attempts (reserved or refused, and what was held right after) and
the month's counters at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "assistant.settings")
    import django

    django.setup()


def spend(i: int, tokens: int, varied: bool) -> int:
    """What attempt ``i`` really uses of its reservation."""
    return 100 + 100 * (i % 9) if varied else tokens


def _counters(category_id: int) -> dict[str, int]:
    from assistant.budgets.models import CategoryMonth

    row = CategoryMonth.objects.get(category_id=category_id)
    return {"used": row.used, "reserved": row.reserved, "calls": row.calls}


def threads(args: argparse.Namespace) -> dict[str, object]:
    _django()
    from tests.budgets.budgets_support import hammer

    attempts = hammer(args.category, args.workers, args.tokens, lambda i: spend(i, args.tokens, args.varied))
    return {"attempts": [a.__dict__ for a in attempts], **_counters(args.category)}


def processes(args: argparse.Namespace) -> dict[str, object]:
    """``--processes`` processes share the ``--workers`` threads; they all start at the same instant."""
    per_process = args.workers // args.processes
    children = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "worker",
                "--category",
                str(args.category),
                "--tokens",
                str(args.tokens),
                "--workers",
                str(per_process),
                "--index",
                str(i),
                *(["--varied"] if args.varied else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(args.processes)
    ]
    for child in children:  # each has set Django up and connected
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    attempts = [a for child in children for a in json.loads(child.communicate(timeout=120)[0])]
    assert all(child.returncode == 0 for child in children)
    _django()
    return {"attempts": attempts, **_counters(args.category)}


def worker(args: argparse.Namespace) -> list[dict[str, object]]:
    _django()
    from django.db import connection

    from tests.budgets.budgets_support import hammer

    connection.ensure_connection()
    connection.close()
    print("ready", flush=True)
    sys.stdin.readline()
    offset = args.index * args.workers
    attempts = hammer(args.category, args.workers, args.tokens, lambda i: spend(offset + i, args.tokens, args.varied))
    return [a.__dict__ for a in attempts]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["threads", "processes", "worker"])
    parser.add_argument("--category", type=int, required=True)
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--varied", action="store_true")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--index", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps({"threads": threads, "processes": processes, "worker": worker}[args.mode](args)))


if __name__ == "__main__":
    main()
