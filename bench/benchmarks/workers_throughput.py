"""Runs completed per minute by one and by two Celery workers (scaled out), on the demo provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..registry import Result, benchmark

ROOT = Path(__file__).resolve().parents[2]
CONCURRENCY = 8  # RUNS_WORKER_CONCURRENCY: runs one worker executes at once
RUNS_PER_WORKER = 4 * CONCURRENCY
LATENCY = "1.0"  # seconds before each demo model call answers: model time dominates, as with real providers
PACE = "0"  # the text of a call arrives at once
POSTGRES = os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432")
REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")

ADMIN = """
import sys, psycopg
with psycopg.connect(sys.argv[1] + "/postgres", autocommit=True) as c:
    c.execute(f'DROP DATABASE IF EXISTS "{sys.argv[2]}" WITH (FORCE)')
    if sys.argv[3] == "create":
        c.execute(f'CREATE DATABASE "{sys.argv[2]}"')
"""
SETUP = """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
call_command("load_demo", verbosity=0)
"""
# Creates the runs (one conversation each), queues them all at once, waits for the last to end.
LOAD = """
import json, sys, time, django
django.setup()
from django.contrib.auth import get_user_model
from assistant.runs import intake
from assistant.runs.models import Run
from assistant.orgs.models import Organisation
from assistant.workers.tasks import execute
user = get_user_model().objects.get(username="demo")
org = Organisation.objects.get(slug="demo")
ask = intake.Ask(text="Bimbamjob: invoices 2024, payments and relationship", model="demo-large", level="approfondi",
                 resources=("kb:factures", "kb:comptes-rendus", "agents"))
ids = [intake.create_run(user, org, None, ask).run.pk for _ in range(int(sys.argv[1]))]
started = time.time()
for pk in ids:
    execute.apply_async((pk.hex, None))
while Run.objects.filter(pk__in=ids, status="running").exists():
    time.sleep(0.05)
ended = time.time()
done = list(Run.objects.filter(pk__in=ids).select_related("lease"))
print(json.dumps({
    "seconds": ended - started,
    "ok": sum(r.status == "ok" for r in done),
    "run_seconds": sorted((r.finished.timestamp() - r.created.timestamp()) for r in done),
    "executing": sorted((r.finished.timestamp() - r.lease.claimed.timestamp()) for r in done),
    "executors": sorted({r.lease.executor for r in done}),
}))
"""


def _measure(env: dict[str, str], folder: Path, workers: int) -> dict[str, object]:
    processes = []
    try:
        for i in range(workers):
            log = folder / f"worker-{workers}-{i}.log"
            with log.open("wb") as out:
                processes.append(
                    (
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-m",
                                "celery",
                                "-A",
                                "assistant.workers.celery",
                                "worker",
                                "--loglevel",
                                "INFO",
                                "--hostname",
                                f"bench{workers}-{i}@%h",
                                "--without-gossip",
                                "--without-mingle",
                                "--without-heartbeat",
                            ],
                            cwd=ROOT,
                            env=env,
                            stdout=out,
                            stderr=subprocess.STDOUT,
                        ),
                        log,
                    )
                )
        deadline = time.monotonic() + 120
        for process, log in processes:
            while " ready." not in log.read_text(errors="replace"):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"a worker did not start:\n{log.read_text(errors='replace')}")
                time.sleep(0.1)
        # A warm-up: imports, connections, the catalogue's snapshot.
        subprocess.run(
            [sys.executable, "-c", LOAD, str(workers * 2)],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=600,
        )
        made = subprocess.run(
            [sys.executable, "-c", LOAD, str(workers * RUNS_PER_WORKER)],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=900,
        )
        return json.loads(made.stdout.strip().splitlines()[-1])
    finally:
        for process, _ in processes:
            process.terminate()
        for process, _ in processes:
            process.wait(timeout=60)


@benchmark("Scaled out: runs completed per minute by Celery workers", order=70)
def workers_throughput() -> list[Result]:
    """A PostgreSQL database of its own (on 127.0.0.1, created and dropped by the benchmark), Redis
    (database 14, keys of its own), the demo data, and `celery worker` processes started as the
    Procfile does (`RUNS_EXECUTOR=celery`, `RUNS_WORKER_CONCURRENCY=8`: eight runs at once per worker).
    The offline demo provider answers each call after a fixed latency (`DEMO_LATENCY=1` s, as a real
    provider's latency dominates a run) and streams without pause (`DEMO_PACE=0`), so one run (level Approfondi, two knowledge bases and agents:
    the main model delegates to two agents in parallel, each searches, reads and reports, then the
    main model answers) takes about 5 s of model time and little CPU. A client process creates 32 runs per worker,
    queues them all at once (the Celery task `runs.execute`, as the web server does) and waits until
    every one has ended; runs per minute = runs ÷ that wall time × 60. Before measuring, each set of
    workers executes two runs per worker to warm up. Everything (web client, workers, PostgreSQL,
    Redis) shares the machine's cores."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        database = f"bench_scale_{os.getpid()}"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "assistant.settings",
            "DATABASE_URL": f"{POSTGRES}/{database}",
            "REDIS_URL": REDIS,
            "REDIS_PREFIX": f"bench-{os.getpid()}",
            "RUNS_EXECUTOR": "celery",
            "RUNS_WORKER_CONCURRENCY": str(CONCURRENCY),
            "DEMO_PACE": PACE,
            "DEMO_LATENCY": LATENCY,
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": "bench-only",
            "DJANGO_SECURE_COOKIES": "false",  # plain HTTP on 127.0.0.1
        }
        subprocess.run([sys.executable, "-c", ADMIN, POSTGRES, database, "create"], check=True)
        try:
            subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=env, check=True, capture_output=True)
            one = _measure(env, folder, 1)
            two = _measure(env, folder, 2)
        finally:
            subprocess.run([sys.executable, "-c", ADMIN, POSTGRES, database, "drop"], check=True)
    rows = []
    for workers, measured in ((1, one), (2, two)):
        runs = workers * RUNS_PER_WORKER
        seconds = float(measured["seconds"])  # type: ignore[arg-type]
        durations: list[float] = measured["run_seconds"]  # type: ignore[assignment]
        executing: list[float] = measured["executing"]  # type: ignore[assignment]
        rows.append(
            Result(
                name=f"Runs per minute, {workers} worker{'s' if workers > 1 else ''}",
                figure=runs / seconds * 60,
                unit="runs/min",
                digits=0,
                notes=(
                    f"{runs} runs in {seconds:.1f} s, {measured['ok']} ok, on {len(measured['executors'])} "  # type: ignore[arg-type]
                    f"worker(s); one run from queued to ended: median {durations[len(durations) // 2]:.2f} s, "
                    f"executing: median {executing[len(executing) // 2]:.2f} s"
                ),
            )
        )
    rows.append(Result(name="Two workers ÷ one", figure=rows[1].figure / rows[0].figure, unit="×"))
    return rows
