"""The whole server against the peer: CPU per model request, wall time, first model call, overhead at 0.3 s a call."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import scripted
from ..registry import Result, at_least, at_most, benchmark

ROOT = Path(__file__).resolve().parents[2]
PEER_PYTHON = ROOT / ".venv-peer" / "bin" / "python"
MAIN_MODEL = "gpt-4.1"
QUESTION = "Bimbamjob: invoices 2024, payments and the relationship. Conclude on the risk."
TOOLS = ["kb:factures", "kb:comptes-rendus", "agents"]
REQUESTS_PER_RUN = 8
CALLS_ON_CRITICAL_PATH = 5  # main, agent's search, read, submit, main's answer
LATENCY = 0.3
WARMUP = 2
RUNS = 10  # at zero latency, per mode
SLOW_RUNS = 3  # at LATENCY, per mode
SETUP = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from assistant.orgs import keys
from assistant.orgs.models import Organisation
call_command("migrate", verbosity=0)
call_command("load_catalogue", verbosity=0)
call_command("load_demo", verbosity=0)
print(json.dumps({"key": keys.create_key(Organisation.objects.get(slug="demo"), "bench")[1]}))
"""


@dataclass(slots=True)
class Phase:
    """Runs of one mode at one latency: each run's (start, end) on the monotonic clock, the CPU they took."""

    label: str
    runs: list[tuple[float, float]] = field(default_factory=list)
    cpu: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def walls(self) -> list[float]:
        return [end - start for start, end in self.runs]

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    def per_run(self) -> list[list[dict[str, Any]]]:
        """The model requests logged during each run (runs go one after the other)."""
        return [[r for r in self.requests if start <= r["arrived"] <= end] for start, end in self.runs]

    @property
    def first_calls(self) -> list[float]:
        return [reqs[0]["arrived"] - start for (start, _), reqs in zip(self.runs, self.per_run(), strict=True) if reqs]

    @property
    def cpu_per_request(self) -> float:
        return self.cpu / max(1, len(self.requests))

    @property
    def requests_per_run(self) -> float:
        return len(self.requests) / max(1, len(self.runs))


# The server ---------------------------------------------------------------------------------------


def tree_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and every live descendant (every thread), from ``/proc``."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid = int(fields[1])
        children.setdefault(ppid, []).append(int(entry))
        # utime, stime, and the CPU of children that ended and were waited for (cutime, cstime).
        times[int(entry)] = sum(int(x) for x in fields[11:15]) / tick
    total, stack = 0.0, [pid]
    while stack:
        p = stack.pop()
        total += times.get(p, 0.0)
        stack += children.get(p, [])
    return total


@dataclass(slots=True)
class Server:
    process: subprocess.Popen[bytes]
    port: int
    key: str
    database: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def server(model_url: str, database_url: str = "") -> Iterator[Server]:
    """The real server (daphne, ``assistant.asgi``, debug off), its models served by the scripted server."""
    with tempfile.TemporaryDirectory() as folder:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "assistant.settings",
            "SQLITE_PATH": str(Path(folder) / "db.sqlite3"),
            "DATABASE_URL": database_url,
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": "bench-only",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "DJANGO_SECURE_COOKIES": "false",
            "OPENAI_API_KEY": "sk-bench",
            "OPENAI_BASE_URL": model_url,
            "MISTRAL_API_KEY": "",
            "REDIS_URL": "",
            "LOG_LEVEL": "WARNING",
        }
        made = subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=env, capture_output=True, text=True)
        if made.returncode != 0:
            raise RuntimeError(f"the server's database could not be set up:\n{made.stderr[-3000:]}")
        key = json.loads(made.stdout.strip().splitlines()[-1])["key"]
        port = _free_port()
        log_path = Path(folder) / "server.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "assistant.asgi:application"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                _wait_for(port, process, log_path)
                yield Server(process, port, key, "PostgreSQL" if database_url else "SQLite")
            finally:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()


def _wait_for(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start:\n{log.read_text()[-3000:]}") from None
            time.sleep(0.1)


# Driving it ---------------------------------------------------------------------------------------


class Driver:
    """The official ``openai`` client on the server's API; a run's start is stamped as its request is sent."""

    def __init__(self, srv: Server) -> None:
        import httpx2
        import openai

        self.sent = 0.0

        def stamp(request: Any) -> None:
            self.sent = time.monotonic()

        self.client = openai.OpenAI(
            base_url=srv.base_url,
            api_key=srv.key,
            max_retries=0,
            timeout=120,
            http_client=httpx2.Client(event_hooks={"request": [stamp]}),
        )

    def run(self, stream: bool) -> tuple[float, float]:
        body: dict[str, Any] = {"tools_enabled": TOOLS, "reasoning_level": "approfondi"}
        messages: Any = [{"role": "user", "content": QUESTION}]
        if stream:
            chunks = self.client.chat.completions.create(
                model=MAIN_MODEL, messages=messages, stream=True, extra_body=body
            )
            last: Any = None
            for chunk in chunks:
                last = chunk
            status = (last.model_extra or {}).get("status") if last is not None else None
        else:
            done = self.client.chat.completions.create(model=MAIN_MODEL, messages=messages, extra_body=body)
            status = (done.model_extra or {}).get("status")
        end = time.monotonic()
        if status != "ok":
            raise RuntimeError(f"a run ended {status!r}")
        return self.sent, end


def _phase(label: str, srv: Server, model: scripted.Handle, stream: bool, runs: int, latency: float) -> Phase:
    driver = Driver(srv)
    model.set_latency(latency)
    for _ in range(WARMUP):
        driver.run(stream)
    model.reset()
    phase = Phase(label)
    before = tree_cpu(srv.process.pid)
    for _ in range(runs):
        phase.runs.append(driver.run(stream))
    phase.cpu = tree_cpu(srv.process.pid) - before
    phase.requests = model.requests()
    return phase


def _peer_phase(label: str, model: scripted.Handle, stream: bool, runs: int, latency: float) -> Phase:
    model.set_latency(latency)
    model.reset()
    command = [str(PEER_PYTHON), str(ROOT / "bench" / "peer.py"), "--base-url", model.base_url]
    command += ["--runs", str(runs), "--warmup", str(WARMUP)] + (["--stream"] if stream else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the peer failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    phase = Phase(label, [(r["start"], r["end"]) for r in out["runs"]], out["cpu_seconds"])
    phase.requests = [r for r in model.requests() if r["arrived"] >= phase.runs[0][0]]
    return phase


@dataclass(slots=True)
class Measured:
    ours: dict[str, Phase]
    peer: dict[str, Phase]
    database: str


def measure(model: scripted.Handle, database_url: str = "") -> Measured:
    with server(model.base_url, database_url) as srv:
        ours = {
            "fast-stream": _phase("streamed, instant model", srv, model, True, RUNS, 0.0),
            "fast-json": _phase("non-streamed, instant model", srv, model, False, RUNS, 0.0),
            "slow-stream": _phase(f"streamed, {LATENCY} s a call", srv, model, True, SLOW_RUNS, LATENCY),
            "slow-json": _phase(f"non-streamed, {LATENCY} s a call", srv, model, False, SLOW_RUNS, LATENCY),
        }
        database = srv.database
    peer: dict[str, Phase] = {}
    if PEER_PYTHON.exists():
        peer = {
            "fast-json": _peer_phase("peer, instant model", model, False, RUNS, 0.0),
            "fast-stream": _peer_phase("peer streamed, instant model", model, True, RUNS, 0.0),
            "slow-json": _peer_phase(f"peer, {LATENCY} s a call", model, False, SLOW_RUNS, LATENCY),
        }
    return Measured(ours, peer, database)


def _ms(seconds: float) -> float:
    return seconds * 1000


def rows(m: Measured, suffix: str = "") -> list[Result]:
    o, p = m.ours, m.peer
    load = os.getloadavg()
    critical = CALLS_ON_CRITICAL_PATH * LATENCY
    fast_cpu = (o["fast-stream"].cpu + o["fast-json"].cpu) / max(
        1, len(o["fast-stream"].requests) + len(o["fast-json"].requests)
    )
    counts = ", ".join(f"{ph.label}: {ph.requests_per_run:g}" for ph in [*o.values(), *p.values()])
    out = [
        Result(
            name=f"Server CPU per model request{suffix}",
            figure=_ms(fast_cpu),
            unit="ms",
            notes=f"{m.database}; streamed {_ms(o['fast-stream'].cpu_per_request):.1f} ms, non-streamed "
            f"{_ms(o['fast-json'].cpu_per_request):.1f} ms; the daphne process tree's CPU (/proc) over "
            f"{2 * RUNS} runs at zero latency ÷ the {len(o['fast-stream'].requests) + len(o['fast-json'].requests)} "
            f"requests the scripted server logged; model requests a run: {counts}; load average "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} after the runs",
        ),
    ]
    if p:
        peer_cpu = p["fast-json"].cpu_per_request
        out += [
            Result(
                name="Peer CPU per model request",
                figure=_ms(peer_cpu),
                unit="ms",
                notes=f"Agents SDK 0.24, non-streamed; streamed {_ms(p['fast-stream'].cpu_per_request):.1f} ms; "
                "the peer process's CPU (/proc) ÷ the requests logged",
            ),
            Result(
                name=f"CPU ratio, server ÷ peer{suffix}",
                figure=fast_cpu / peer_cpu if peer_cpu else 0.0,
                unit="×",
                target=at_most(1.5),
            ),
        ]
    gap = abs(o["fast-json"].wall - o["fast-stream"].wall)
    out += [
        Result(
            name=f"Wall of a run, instant model, streamed{suffix}",
            figure=_ms(o["fast-stream"].wall),
            unit="ms",
            digits=0,
            notes="median of " + str(RUNS) + "; all: " + ", ".join(f"{_ms(w):.0f}" for w in o["fast-stream"].walls),
        ),
        Result(
            name=f"Wall of a run, instant model, non-streamed{suffix}",
            figure=_ms(o["fast-json"].wall),
            unit="ms",
            digits=0,
            notes="median of " + str(RUNS) + "; all: " + ", ".join(f"{_ms(w):.0f}" for w in o["fast-json"].walls),
        ),
        Result(
            name=f"Non-streamed minus streamed wall{suffix}",
            figure=_ms(gap),
            unit="ms",
            digits=0,
            target=at_most(50),
        ),
    ]
    if p:
        out.append(
            Result(
                name="Peer wall of a run, instant model",
                figure=_ms(p["fast-json"].wall),
                unit="ms",
                digits=0,
                notes=f"streamed {_ms(p['fast-stream'].wall):.0f} ms",
            )
        )
    firsts = [d for key in ("fast-stream", "fast-json") for d in o[key].first_calls]
    out.append(
        Result(
            name=f"Request to its first model call, median{suffix}",
            figure=_ms(statistics.median(firsts)),
            unit="ms",
            target=at_most(30),
            notes=f"from the client sending POST /v1/chat/completions to the scripted server receiving the main "
            f"model's first request; {len(firsts)} runs at zero latency; max {_ms(max(firsts)):.1f} ms"
            + (f"; the peer: {_ms(statistics.median(p['fast-json'].first_calls)):.1f} ms" if p else ""),
        )
    )
    for key, label in (("slow-stream", "streamed"), ("slow-json", "non-streamed")):
        wall = o[key].wall
        out += [
            Result(
                name=f"Overhead over the critical path at {LATENCY} s a call, {label}{suffix}",
                figure=_ms(wall - critical),
                unit="ms",
                digits=0,
                target=at_most(100),
                notes=f"wall {wall:.3f} s (median of {SLOW_RUNS}: "
                + ", ".join(f"{w:.3f}" for w in o[key].walls)
                + f") − critical path {critical:.1f} s ({CALLS_ON_CRITICAL_PATH} calls)",
            ),
            Result(
                name=f"Parallel efficiency at {LATENCY} s a call, {label}{suffix}",
                figure=critical / wall,
                digits=3,
                target=at_least(0.94),
            ),
        ]
    if p:
        wall = p["slow-json"].wall
        out.append(
            Result(
                name=f"Peer parallel efficiency at {LATENCY} s a call",
                figure=critical / wall,
                digits=3,
                notes=f"wall {wall:.3f} s, overhead {_ms(wall - critical):.0f} ms",
            )
        )
    return out


def _postgres() -> str:
    """BENCH_POSTGRES when it names a PostgreSQL that answers, else empty."""
    url = os.environ.get("BENCH_POSTGRES", "")
    if not url:
        return ""
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=3).close()
    except Exception:
        return ""
    return url


@benchmark("Whole server against the peer: CPU, wall, first call, overhead", order=70)
def whole_server() -> list[Result]:
    """The real server (daphne, `assistant.asgi`, debug off, SQLite in a temporary folder, the catalogue
    and the demo organisation loaded, in-memory channel layer, the embedded executor) with
    `OPENAI_BASE_URL` pointing at `bench/scripted.py`, a scripted server of our own speaking OpenAI's
    chat-completions wire protocol (server-sent events with tool-call arguments split across chunks,
    a last chunk with the usage and its cached tokens; JSON when not streamed) in a process of its own,
    waiting a fixed latency before each answer and logging each request's arrival. Scenario: the main
    model (`gpt-4.1`) delegates two tasks in one `agents` call; each agent (the cheapest model the `agents` tool offers, `gpt-4o-mini`) calls
    `kb_search`, `kb_read` of the hits, `submit_result`; the main model answers: 8 model requests a
    run. It is driven through `POST /v1/chat/completions` by the official `openai` client, one run after
    the other, streamed and not, after 2 warm-up runs of each kind. CPU: the daphne process tree's user
    + system time (`/proc/<pid>/stat`) over the measured runs ÷ the model requests the scripted server
    logged. Wall: from the client sending the request to the response's end, median. First model call:
    from that send to the scripted server receiving the run's first request. At 0.3 s a call the
    critical path is 5 calls (main, an agent's 3, main) = 1.5 s; overhead = wall − 1.5 s, efficiency =
    1.5 s ÷ wall. The peer (`bench/peer.py`: OpenAI Agents SDK 0.24, `OpenAIChatCompletionsModel`,
    tracing disabled, a lead with two agents as tools doing the same search, read, submit and answer,
    in `.venv-peer`) runs on the same scripted server in the same benchmark, counted the same way (its
    process's CPU from `/proc` ÷ the requests logged). When `BENCH_POSTGRES` names a PostgreSQL that
    answers, the server's figures are measured again on it."""
    model = scripted.spawn()
    try:
        out = rows(measure(model))
        pg = _postgres()
        if pg:
            pg_rows = rows(measure(model, pg), suffix=" (PostgreSQL)")
            out += [r for r in pg_rows if "(PostgreSQL)" in r.name]
    finally:
        model.stop()
    if not PEER_PYTHON.exists():
        out.append(Result(name="Peer", figure=0, notes="not measured: .venv-peer is missing (`make bench` creates it)"))
    return out
