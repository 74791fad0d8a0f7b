"""Count the database statements and commits of the whole-server benchmark's run: ``python -m bench.statements``.

The scenario of ``bench/benchmarks/whole_server.py`` (``POST /v1/chat/completions``, the main model delegating two
tasks, 8 model requests a run against ``bench/scripted.py``), driven in this process through Django's
``AsyncClient`` (the same middleware, view and run executor as the server's), on a fresh SQLite database, or on a new
PostgreSQL database with ``--postgres URL`` (dropped afterwards). Every statement of every connection is recorded
(``connection.execute_wrappers``) with the outermost of the project's functions that sent it (the function handed
to the database thread: ``_create``, ``claim``, ``end_run``, the recorder's, the ledger's...), and every commit:
an outermost ``atomic`` block that wrote, or a write in autocommit mode (each its own transaction). On PostgreSQL
each such commit waits for the WAL (``synchronous_commit``), so their number on the way to the first model call
and at the run's end counts as well as the statements.

It prints, a run on average, the statements and writing commits by phase (before the run's first model request
arrived at the scripted server; from then to its last; after it) and by the function that sent them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


@dataclass(slots=True)
class Statement:
    at: float
    sql: str
    where: str
    write: bool
    atomic: bool


@dataclass(slots=True)
class Commit:
    at: float
    where: str


@dataclass(slots=True)
class Recording:
    on: bool = False
    statements: list[Statement] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    wrote: dict[int, bool] = field(default_factory=dict)  # a connection's open transaction has written


def _where() -> str:
    """The outermost of the project's frames on this thread's stack (this module's excepted): who sent it."""
    for frame in traceback.extract_stack():
        path = frame.filename
        if "/assistant/" in path:
            return f"{path.rsplit('/assistant/', 1)[1]}:{frame.name}"
    return "(outside the project)"


def _install(recording: Recording) -> None:
    from django.db import connections
    from django.db.backends.signals import connection_created

    def wrap(conn: Any) -> None:
        if getattr(conn, "_bench_counted", False):
            return
        conn._bench_counted = True

        def execute(run: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
            if recording.on:
                write = sql.lstrip().split(" ", 1)[0].upper() in WRITES
                statement = Statement(time.monotonic(), sql, _where(), write, conn.in_atomic_block)
                recording.statements.append(statement)
                if write and conn.in_atomic_block:
                    recording.wrote[id(conn)] = True
                elif write:
                    recording.commits.append(Commit(statement.at, statement.where))
            return run(sql, params, many, context)

        conn.execute_wrappers.append(execute)
        commit = conn.commit

        def counted_commit() -> None:
            if recording.on and recording.wrote.pop(id(conn), False):
                recording.commits.append(Commit(time.monotonic(), _where()))
            commit()

        conn.commit = counted_commit
        rollback = conn.rollback

        def counted_rollback() -> None:
            recording.wrote.pop(id(conn), None)
            rollback()

        conn.rollback = counted_rollback

    def created(sender: Any, connection: Any, **kwargs: Any) -> None:
        wrap(connection)

    connection_created.connect(created, weak=False)
    for conn in connections.all():
        wrap(conn)


def _setup() -> str:
    from django.core.management import call_command

    from assistant.orgs import keys
    from assistant.orgs.models import Organisation

    call_command("migrate", verbosity=0)
    call_command("load_catalogue", verbosity=0)
    call_command("load_demo", verbosity=0)
    key, secret = keys.create_key(Organisation.objects.get(slug="demo"), "bench")
    key.rate_limit = 100_000
    key.save(update_fields=["rate_limit"])
    return secret


async def _drive(runs: int, stream: bool, secret: str, recording: Recording) -> list[tuple[float, float]]:
    """``runs`` runs through the official client on the ASGI application (a warm-up first, not recorded), each
    until its end (the after-run hooks included): when each started and ended."""
    import httpx2
    import openai

    from assistant.asgi import application
    from assistant.runs import execution

    from .benchmarks.whole_server import MAIN_MODEL, QUESTION, TOOLS

    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=application), base_url="http://testserver")
    extra = {"tools_enabled": TOOLS, "reasoning_level": "approfondi"}
    messages: Any = [{"role": "user", "content": QUESTION}]
    spans = []
    async with openai.AsyncOpenAI(
        base_url="http://testserver/v1", api_key=secret, http_client=http, max_retries=0, timeout=120
    ) as client:
        for i in range(runs + 1):
            recording.on = i > 0
            start = time.monotonic()
            if stream:
                chunks = await client.chat.completions.create(
                    model=MAIN_MODEL, messages=messages, stream=True, extra_body=extra
                )
                last: Any = None
                async for chunk in chunks:
                    last = chunk
                status = (last.model_extra or {}).get("status") if last is not None else None
            else:
                done = await client.chat.completions.create(model=MAIN_MODEL, messages=messages, extra_body=extra)
                status = (done.model_extra or {}).get("status")
            while execution._tasks:  # the run's end (its after-run hooks) is part of it
                await asyncio.gather(*execution._tasks.values(), return_exceptions=True)
            end = time.monotonic()
            recording.on = False
            if status != "ok":
                raise RuntimeError(f"a run ended {status!r}")
            if i > 0:
                spans.append((start, end))
    return spans


def report(recording: Recording, spans: list[tuple[float, float]], log: list[dict[str, Any]], label: str) -> None:
    runs = len(spans)
    phases: dict[str, Counter[str]] = defaultdict(Counter)
    by_where: dict[str, Counter[str]] = defaultdict(Counter)

    def phase_of(at: float) -> str:
        for start, end in spans:
            if start <= at <= end:
                arrivals = [r["arrived"] for r in log if start <= r["arrived"] <= end]
                if not arrivals or at < arrivals[0]:
                    return "1 before the first model call"
                if at < arrivals[-1]:
                    return "2 between the first and the last model call"
                return "3 after the last model call"
        return "0 outside the runs"

    for s in recording.statements:
        phase = phase_of(s.at)
        phases[phase]["statements"] += 1
        phases[phase]["writes"] += s.write
        by_where[s.where]["statements"] += 1
        by_where[s.where]["writes"] += s.write
    for c in recording.commits:
        phases[phase_of(c.at)]["commits"] += 1
        by_where[c.where]["commits"] += 1
    requests = sum(1 for r in log for start, end in spans if start <= r["arrived"] <= end)
    print(f"\n{label}: {runs} runs, {requests / runs:g} model requests a run; a run on average:")
    print(f"{'':52} {'statements':>10} {'writes':>7} {'commits':>8}")
    total: Counter[str] = Counter()
    for phase in sorted(phases):
        c = phases[phase]
        total.update(c)
        print(f"  {phase[2:]:50} {c['statements'] / runs:10.1f} {c['writes'] / runs:7.1f} {c['commits'] / runs:8.1f}")
    print(
        f"  {'the whole run':50} {total['statements'] / runs:10.1f} {total['writes'] / runs:7.1f} "
        f"{total['commits'] / runs:8.1f}"
    )
    print("by the function that sent them:")
    for where, c in sorted(by_where.items(), key=lambda kv: -kv[1]["statements"]):
        print(f"  {where:50} {c['statements'] / runs:10.1f} {c['writes'] / runs:7.1f} {c['commits'] / runs:8.1f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.statements", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stream", action="store_true", help="stream the responses (default: not streamed)")
    parser.add_argument("--postgres", default="", help="a PostgreSQL server's URL: measured on a new database there")
    parser.add_argument("--sql", action="store_true", help="print every statement of the last run")
    args = parser.parse_args(argv)
    from . import scripted
    from .benchmarks.whole_server import fresh_database

    model = scripted.spawn()
    with ExitStack() as stack:
        stack.callback(model.stop)
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        database = stack.enter_context(fresh_database(args.postgres)) if args.postgres else ""
        os.environ.update(
            {
                "DJANGO_SETTINGS_MODULE": "assistant.settings",
                "SQLITE_PATH": str(Path(folder) / "db.sqlite3"),
                "DATABASE_URL": database,
                "DJANGO_DEBUG": "0",
                "DJANGO_SECRET_KEY": "bench-only",
                "DJANGO_ALLOWED_HOSTS": "testserver",
                "DJANGO_SECURE_COOKIES": "false",
                "OPENAI_API_KEY": "sk-bench",
                "OPENAI_BASE_URL": model.base_url,
                "MISTRAL_API_KEY": "",
                "REDIS_URL": "",
                "LOG_LEVEL": "WARNING",
            }
        )
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        secret = _setup()
        from django.db import connections

        connections.close_all()
        recording = Recording()
        _install(recording)
        model.reset()
        spans = asyncio.run(_drive(args.runs, args.stream, secret, recording))
        log = model.requests()
        label = f"{'PostgreSQL' if database else 'SQLite'}, {'streamed' if args.stream else 'not streamed'}"
        report(recording, spans, log, label)
        if args.sql:
            start, end = spans[-1]
            arrivals = [r["arrived"] for r in log if start <= r["arrived"] <= end]
            for s in recording.statements:
                if start <= s.at <= end:
                    mark = "*" if arrivals and s.at < arrivals[0] else ("$" if s.at >= arrivals[-1] else " ")
                    print(f"{mark} {'W' if s.write else ' '} {s.where:45} {s.sql[:150]}")
        connections.close_all()


if __name__ == "__main__":
    main()
