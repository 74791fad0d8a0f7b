"""The time from Stop to a run's end while its agents' model calls hang, or while a slow tool runs (a query, a script,
a connector call): embedded, and on a Celery worker."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..registry import Result, at_most, benchmark
from .workers_throughput import ADMIN, POSTGRES, REDIS, SETUP

ROOT = Path(__file__).resolve().parents[2]
RUNS = 5
HANG = "6"  # seconds each agent's calls after its first round hang (the demo's #demo-hang marker)
TARGET_MS = 250
WORKER_ARGS = (
    "--loglevel",
    "INFO",
    "--hostname",
    "bench-stop@%h",
    "--without-gossip",
    "--without-mingle",
    "--without-heartbeat",
)

# One process, as `make run` serves: SQLite, the embedded executor. Each run delegates to two agents whose second
# calls hang; once both hang (reserved on the category, their round started), Stop as the page's button does
# (`request_stop`), and the run's end is when its task ends (its outcome saved, its end announced).
# What each case asks (argv[3]), and when the run is "in" what Stop must end: the agents' calls hanging (both
# reserved on the category, their second round started), or the slow tool's call saved as started (then 0.2 s).
CASES = """
import threading, uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from assistant.budgets.models import Reservation
from assistant.connectors.models import Connector
from assistant.knowledge.tools import sandbox

CASE = sys.argv[3]
RESOURCES = {"agents": ("kb:factures", "kb:comptes-rendus", "agents"), "query": ("kb:factures",), "code": ("code",),
             "connector": ("mcp:slow",)}[CASE]
MARKER = "#demo-hang=" + sys.argv[2] if CASE == "agents" else "#demo-slow=" + CASE
ASK = intake.Ask(text="Bimbamjob: invoices 2024 " + MARKER, model="demo-large", level="approfondi", resources=RESOURCES)

def slow_connector():
    # A local MCP server whose one read-only tool answers after 600 s, registered for the demo organisation.
    server = MCPServer("slow")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def lookup(query: str) -> str:
        await asyncio.sleep(600)
        return "late"

    config = uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[4]), log_level="warning")
    threading.Thread(target=uvicorn.Server(config).run, daemon=True).start()
    time.sleep(1)
    org = Organisation.objects.get(slug="demo")
    tools = [{"name": "lookup", "description": "Look up.", "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}]
    Connector.objects.update_or_create(organisation=org, name="slow", defaults={"url": f"http://127.0.0.1:{sys.argv[4]}/mcp", "tools": tools})

def offered():
    return CASE != "code" or sandbox() is not None

def create():
    return intake.create_run(get_user_model().objects.get(username="demo"), Organisation.objects.get(slug="demo"), None, ASK)

async def hanging(run):
    if CASE != "agents":
        return await run.steps.filter(kind="tool_call").aexists()
    second = run.steps.filter(kind="round_started", data__round=2, data__agent_id__isnull=False)
    return (await second.acount() == 2 and await Reservation.objects.filter(run=run).acount() == 2)
"""

EMBEDDED = (
    """
import asyncio, json, sys, time, django
django.setup()
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command
from assistant.orgs.models import Organisation
from assistant.runs import execution, intake
from assistant.runs.models import Run

call_command("migrate", verbosity=0)
call_command("load_demo", verbosity=0)
"""
    + CASES
    + """
if CASE == "connector":
    slow_connector()
if not offered():
    print(json.dumps("not offered here"))
    sys.exit(0)

async def main():
    out = []
    for _ in range(int(sys.argv[1])):
        start = await sync_to_async(create)()
        run = start.run
        execution.launch(start)
        while not await hanging(run):
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.2)  # well inside the hang
        asked = time.perf_counter()
        await execution.request_stop(run.pk)
        await execution.wait_for(run.pk)
        ended = time.perf_counter()
        await run.arefresh_from_db()
        out.append({"ms": (ended - asked) * 1000, "status": run.status})
    print(json.dumps(out))

asyncio.run(main())
"""
)

# The web side is this script (the flag and the broadcast, as the page's Stop does); the run executes on a worker.
# Its end is when its row says it ended (polled every 5 ms).
CELERY = (
    """
import asyncio, json, sys, time, django
django.setup()
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from assistant.orgs.models import Organisation
from assistant.runs import execution, intake
from assistant.runs.models import Run
from assistant.workers.tasks import execute
"""
    + CASES
    + """
if CASE == "connector":
    slow_connector()
if not offered():
    print(json.dumps("not offered here"))
    sys.exit(0)

async def main():
    out = []
    for _ in range(int(sys.argv[1])):
        run = (await sync_to_async(create)()).run
        await asyncio.to_thread(execute.apply_async, (run.pk.hex, None))
        while not await hanging(run):
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.2)
        asked = time.perf_counter()
        await execution.request_stop(run.pk)
        while await Run.objects.filter(pk=run.pk, status="running").aexists():
            await asyncio.sleep(0.005)
        ended = time.perf_counter()
        await run.arefresh_from_db()
        out.append({"ms": (ended - asked) * 1000, "status": run.status})
    print(json.dumps(out))

asyncio.run(main())
"""
)


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "assistant.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench-only",
        "DJANGO_SECURE_COOKIES": "false",
        "DEMO_PACE": "0",
        "DEMO_LATENCY": "0.05",
        "RUN_CODE_ENABLED": "1",  # the script case, where this machine can run the sandbox
        "CONNECTOR_ALLOWED_HOSTS": f"127.0.0.1:{CONNECTOR_PORT}",
        **extra,
    }


CONNECTOR_PORT = 18_931  # the slow MCP server of the connector case (started by the web-side script)
CASES = {
    "agents": "two agents whose model calls hang " + HANG + " s",
    "query": "a data_query over a cross join (minutes of work)",
    "code": "a run_code script sleeping 600 s",
    "connector": "a connector call its MCP server answers after 600 s",
}


def _rows(where: str, case: str, measured: list[dict[str, object]] | str) -> list[Result]:
    label = {"agents": "", "query": ", a slow query", "code": ", a script", "connector": ", a slow connector"}[case]
    name = f"Stop to the run's end, {where}{label}"
    if isinstance(measured, str):
        return [Result(name=name, figure=float("nan"), notes=f"not run: {measured}")]
    ms = sorted(float(m["ms"]) for m in measured)  # type: ignore[arg-type]
    statuses = sorted({str(m["status"]) for m in measured})
    notes = (
        f"{len(ms)} runs, each with {CASES[case]}; median {statistics.median(ms):.0f} ms, "
        f"min {ms[0]:.0f}, max {ms[-1]:.0f}; status {', '.join(statuses)}"
    )
    return [
        Result(
            name=f"{name} (worst of {len(ms)})",
            figure=ms[-1],
            unit="ms",
            target=at_most(TARGET_MS),
            notes=notes,
            digits=0,
        )
    ]


def _script(script: str, case: str, env: dict[str, str]) -> list[dict[str, object]] | str:
    made = subprocess.run(
        [sys.executable, "-c", script, str(RUNS), HANG, case, str(CONNECTOR_PORT)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return json.loads(made.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _embedded(folder: Path, case: str) -> list[dict[str, object]] | str:
    env = _env(SQLITE_PATH=str(folder / f"stop-{case}.sqlite3"), MEDIA_ROOT=str(folder / "media"))
    env.pop("DATABASE_URL", None)
    return _script(EMBEDDED, case, env)


def _celery(folder: Path) -> tuple[dict[str, list[dict[str, object]] | str], float]:
    """Each case's Stop latencies on one worker, and how long the worker took to exit on SIGTERM afterwards."""
    database = f"bench_stop_{os.getpid()}"
    env = _env(
        DATABASE_URL=f"{POSTGRES}/{database}",
        REDIS_URL=REDIS,
        REDIS_PREFIX=f"bench-stop-{os.getpid()}",
        RUNS_EXECUTOR="celery",
        RUNS_WORKER_CONCURRENCY="2",
        MEDIA_ROOT=str(folder / "media"),
    )
    subprocess.run([sys.executable, "-c", ADMIN, POSTGRES, database, "create"], check=True)
    try:
        subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=env, check=True, capture_output=True)
        log = folder / "worker.log"
        with log.open("wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "assistant.workers.celery", "worker", *WORKER_ARGS],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 120
            while " ready." not in log.read_text(errors="replace"):
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the worker did not start:\n{log.read_text(errors='replace')}")
                time.sleep(0.1)
            measured = {case: _script(CELERY, case, env) for case in CASES}
        finally:
            asked = time.perf_counter()
            worker.terminate()
            worker.wait(timeout=60)
            exited = time.perf_counter() - asked
        return measured, exited
    finally:
        subprocess.run([sys.executable, "-c", ADMIN, POSTGRES, database, "drop"], check=True)


@benchmark("Stop while an agent's model call or a slow tool runs", order=75)
def stop_latency() -> list[Result]:
    """Five runs per case, one after the other, on the offline demo provider. Agents: the main model delegates to two
    agents (level Approfondi, two knowledge bases), each searches, and each agent's next call hangs 6 s (the demo's
    `#demo-hang=6`); once both hang (their second round started and its call reserved on the category). A slow
    tool (the demo's `#demo-slow=query|code|connector`): the main model's first round calls `data_query` over a cross
    join of the invoices' table, `run_code` with a script that sleeps, or the tool of a connector whose local MCP
    server answers after 600 s; once its call is saved as started. Then 0.2 s more, and Stop is pressed as the page
    does (`runs.execution.request_stop`: the flag, the broadcast, and the token at once when the run executes in this
    process). Measured: from Stop to the run's end, the worst of the five. Embedded: one process with SQLite, the
    embedded executor, to the end of the run's task (outcome saved, end announced). Celery (PostgreSQL on
    127.0.0.1, a database of its own, Redis database 14 and one `celery worker` of two task threads): from Stop in
    the web-side process to the run's row saying it ended (polled every 5 ms); then the worker is sent SIGTERM and
    the time it takes to exit is noted. Before Stop aborted the agents' calls, a run waited for them: about the 6 s
    of the hang; before it stopped the tools, a run waited for its tool (a query's 10 s limit, a connector's)."""
    rows: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for case in CASES:
            rows += _rows("embedded", case, _embedded(folder, case))
        try:
            measured, exited = _celery(folder)
        except (OSError, subprocess.SubprocessError, RuntimeError) as e:  # no PostgreSQL or Redis here
            rows.append(Result(name="Stop to the run's end, Celery worker", figure=float("nan"), notes=f"not run: {e}"))
            return rows
        for case in CASES:
            rows += _rows("Celery worker", case, measured[case])
        rows.append(
            Result(name="Celery worker exit on SIGTERM, after the runs", figure=exited * 1000, unit="ms", digits=0)
        )
    return rows
