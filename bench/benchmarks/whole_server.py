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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import scripted, spy
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
RUNS = 16  # at zero latency, of each kind
SLOW_RUNS = 6  # at LATENCY, of each kind
PROFILE_RUNS = 10  # of each kind, recorded by py-spy
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
key, secret = keys.create_key(Organisation.objects.get(slug="demo"), "bench")
key.rate_limit = 100_000  # requests a minute: the benchmark sends about 150 in one
key.save(update_fields=["rate_limit"])
print(json.dumps({"key": secret}))
"""


@dataclass(slots=True)
class Run:
    """One run: when it started and ended (``time.monotonic()``, the scripted server's clock), the CPU it took,
    and the model requests the scripted server logged meanwhile (runs go one after the other)."""

    start: float
    end: float
    cpu: float
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return self.end - self.start

    @property
    def first_call(self) -> float | None:
        return self.requests[0]["arrived"] - self.start if self.requests else None


@dataclass(slots=True)
class Phase:
    """The runs of one engine (ours or the peer), one mode (streamed or not), one latency."""

    label: str
    runs: list[Run] = field(default_factory=list)

    @property
    def walls(self) -> list[float]:
        return [r.wall for r in self.runs]

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def first_calls(self) -> list[float]:
        return [r.first_call for r in self.runs if r.first_call is not None]

    @property
    def requests(self) -> int:
        return sum(len(r.requests) for r in self.runs)

    @property
    def cpu(self) -> float:
        return sum(r.cpu for r in self.runs)

    @property
    def cpu_per_request(self) -> float:
        return self.cpu / max(1, self.requests)

    @property
    def requests_per_run(self) -> float:
        return self.requests / max(1, len(self.runs))


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
def server(model_url: str, database_url: str = "", root: Path = ROOT) -> Iterator[Server]:
    """The real server (daphne, ``assistant.asgi``, debug off), its models served by the scripted server; ``root``:
    the source tree it runs from (another checkout, to compare two versions side by side)."""
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
        made = subprocess.run([sys.executable, "-c", SETUP], cwd=root, env=env, capture_output=True, text=True)
        if made.returncode != 0:
            raise RuntimeError(f"the server's database could not be set up:\n{made.stderr[-3000:]}")
        key = json.loads(made.stdout.strip().splitlines()[-1])["key"]
        port = _free_port()
        log_path = Path(folder) / "server.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", _daphne(root), "-b", "127.0.0.1", "-p", str(port), "assistant.asgi:application"],
                cwd=root,
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


def _daphne(root: Path) -> str:
    """Daphne's command line as the tree serves: through its own server class where it has one (``assistant.server``)."""
    return "assistant.server" if (root / "assistant" / "server" / "__main__.py").exists() else "daphne"


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


class Peer:
    """``bench/peer.py`` in ``.venv-peer``, one run for each line it is sent."""

    def __init__(self, model: scripted.Handle) -> None:
        command = [str(PEER_PYTHON), str(ROOT / "bench" / "peer.py"), "--base-url", model.base_url]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._read()

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the peer ended (exit status {self.process.wait()})")
        value: dict[str, Any] = json.loads(line)
        return value

    def run(self, stream: bool) -> Run:
        assert self.process.stdin is not None
        self.process.stdin.write("stream\n" if stream else "json\n")
        self.process.stdin.flush()
        out = self._read()
        return Run(out["start"], out["end"], out["cpu"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _ours(srv: Server, driver: Driver, stream: bool) -> Run:
    before = tree_cpu(srv.process.pid)
    start, end = driver.run(stream)
    return Run(start, end, tree_cpu(srv.process.pid) - before)


@dataclass(slots=True)
class Measured:
    ours: dict[str, Phase]
    peer: dict[str, Phase]
    database: str
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)


def measure(
    model: scripted.Handle, database_url: str = "", with_peer: bool = True, profile: Path | None = None
) -> Measured:
    """Our runs and the peer's interleaved (ours streamed, ours not, the peer's), at zero latency then at LATENCY;
    then, with ``profile``, PROFILE_RUNS more of ours at zero latency recorded by py-spy into that file."""
    m = Measured({}, {}, "", os.getloadavg())
    peer = Peer(model) if with_peer and PEER_PYTHON.exists() else None
    try:
        with server(model.base_url, database_url) as srv:
            m.database = srv.database
            driver = Driver(srv)
            for latency, runs, speed in ((0.0, RUNS, "fast"), (LATENCY, SLOW_RUNS, "slow")):
                model.set_latency(latency)
                label = "instant model" if latency == 0 else f"{latency:g} s a call"
                kinds: list[tuple[str, Callable[[], Run]]] = [
                    (f"{speed}-stream", lambda: _ours(srv, driver, True)),
                    (f"{speed}-json", lambda: _ours(srv, driver, False)),
                ]
                if peer is not None:
                    kinds += [
                        (f"peer-{speed}-json", lambda: peer.run(False)),
                        (f"peer-{speed}-stream", lambda: peer.run(True)),
                    ]
                for _ in range(WARMUP if latency == 0 else 0):
                    for _key, go in kinds:
                        go()
                model.reset()
                phases = {key: Phase(f"{key.replace('-', ' ')}, {label}") for key, _ in kinds}
                for _ in range(runs):
                    for key, go in kinds:
                        phases[key].runs.append(go())
                log = model.requests()
                for phase in phases.values():
                    for run in phase.runs:
                        run.requests = [r for r in log if run.start <= r["arrived"] <= run.end]
                for key, phase in phases.items():
                    (m.peer if key.startswith("peer-") else m.ours)[key.removeprefix("peer-")] = phase
            if profile is not None:
                model.set_latency(0.0)
                spy.record(srv.process.pid, lambda: [driver.run(s) for s in (True, False) * PROFILE_RUNS], profile)
    finally:
        if peer is not None:
            peer.close()
    m.load_after = os.getloadavg()
    return m


def _ms(seconds: float) -> float:
    return seconds * 1000


def _cpu(*phases: Phase) -> float:
    """CPU per model request over these phases together, in seconds."""
    return sum(p.cpu for p in phases) / max(1, sum(p.requests for p in phases))


def _walls(phase: Phase) -> str:
    return ", ".join(f"{_ms(w):.0f}" for w in phase.walls)


def rows(m: Measured, suffix: str = "") -> list[Result]:
    o, p = m.ours, m.peer
    critical = CALLS_ON_CRITICAL_PATH * LATENCY
    load = (
        f"load average {m.load_before[0]:.2f} {m.load_before[1]:.2f} {m.load_before[2]:.2f} before, "
        f"{m.load_after[0]:.2f} {m.load_after[1]:.2f} {m.load_after[2]:.2f} after, on {os.cpu_count()} cores"
    )
    ours_cpu = _cpu(o["fast-stream"], o["fast-json"])
    counts = ", ".join(f"{ph.label}: {ph.requests_per_run:g}" for ph in [*o.values(), *p.values()])
    out = [
        Result(
            name=f"Server CPU per model request{suffix}",
            figure=_ms(ours_cpu),
            unit="ms",
            notes=f"{m.database}; streamed {_ms(_cpu(o['fast-stream'])):.1f} ms, non-streamed "
            f"{_ms(_cpu(o['fast-json'])):.1f} ms; the daphne process tree's CPU (/proc) over {2 * RUNS} runs at "
            f"zero latency ÷ the {o['fast-stream'].requests + o['fast-json'].requests} model requests the scripted "
            f"server logged meanwhile; model requests a run: {counts}; {load}",
        ),
    ]
    if p:
        peer_cpu = _cpu(p["fast-stream"], p["fast-json"])
        out += [
            Result(
                name=f"Peer CPU per model request{suffix}",
                figure=_ms(peer_cpu),
                unit="ms",
                notes=f"Agents SDK 0.24 in the same benchmark, its runs between ours; non-streamed "
                f"{_ms(_cpu(p['fast-json'])):.1f} ms, streamed {_ms(_cpu(p['fast-stream'])):.1f} ms; the peer "
                "process's CPU (/proc) ÷ the requests logged",
            ),
            Result(
                name=f"CPU ratio, server ÷ peer{suffix}",
                figure=ours_cpu / peer_cpu if peer_cpu else 0.0,
                unit="×",
                target=at_most(1.5),
            ),
        ]
    gap = o["fast-json"].wall - o["fast-stream"].wall
    out += [
        Result(
            name=f"Wall of a run, instant model, streamed{suffix}",
            figure=_ms(o["fast-stream"].wall),
            unit="ms",
            digits=0,
            notes=f"median of {RUNS}: {_walls(o['fast-stream'])}",
        ),
        Result(
            name=f"Wall of a run, instant model, non-streamed{suffix}",
            figure=_ms(o["fast-json"].wall),
            unit="ms",
            digits=0,
            notes=f"median of {RUNS}: {_walls(o['fast-json'])}",
        ),
        Result(
            name=f"Non-streamed minus streamed wall{suffix}",
            figure=_ms(abs(gap)),
            unit="ms",
            digits=0,
            target=at_most(50),
            notes=f"difference of the medians, the two kinds of runs taking turns ({'non-streamed' if gap > 0 else 'streamed'} slower)",
        ),
    ]
    if p:
        out.append(
            Result(
                name=f"Peer wall of a run, instant model{suffix}",
                figure=_ms(p["fast-json"].wall),
                unit="ms",
                digits=0,
                notes=f"non-streamed, median of {RUNS}; streamed {_ms(p['fast-stream'].wall):.0f} ms",
            )
        )
    firsts = sorted(d for key in ("fast-stream", "fast-json") for d in o[key].first_calls)
    peer_firsts = [d for key in ("fast-stream", "fast-json") for d in p[key].first_calls] if p else []
    out.append(
        Result(
            name=f"Request to its first model call, median{suffix}",
            figure=_ms(statistics.median(firsts)),
            unit="ms",
            target=at_most(30),
            notes=f"from the client sending POST /v1/chat/completions to the scripted server receiving the main "
            f"model's first request; {len(firsts)} runs at zero latency, streamed or not; fastest "
            f"{_ms(firsts[0]):.1f} ms, slowest {_ms(firsts[-1]):.1f} ms"
            + (f"; the peer (from Runner.run): {_ms(statistics.median(peer_firsts)):.1f} ms" if peer_firsts else ""),
        )
    )
    for key, label in (("slow-stream", "streamed"), ("slow-json", "non-streamed")):
        wall = o[key].wall
        out += [
            Result(
                name=f"Overhead over the critical path at {LATENCY:g} s a call, {label}{suffix}",
                figure=_ms(wall - critical),
                unit="ms",
                digits=0,
                target=at_most(100),
                notes=f"wall {wall:.3f} s (median of {SLOW_RUNS}: "
                + ", ".join(f"{w:.3f}" for w in o[key].walls)
                + f") − critical path {critical:.1f} s ({CALLS_ON_CRITICAL_PATH} calls)",
            ),
            Result(
                name=f"Parallel efficiency at {LATENCY:g} s a call, {label}{suffix}",
                figure=critical / wall,
                digits=3,
                target=at_least(0.94),
            ),
        ]
    if p:
        wall = p["slow-json"].wall
        out.append(
            Result(
                name=f"Peer parallel efficiency at {LATENCY:g} s a call{suffix}",
                figure=critical / wall,
                digits=3,
                notes=f"non-streamed: wall {wall:.3f} s, overhead {_ms(wall - critical):.0f} ms; streamed "
                f"{critical / p['slow-stream'].wall:.3f} ({_ms(p['slow-stream'].wall - critical):.0f} ms)",
            )
        )
    return out


def _postgres() -> str:
    """The PostgreSQL ``BENCH_POSTGRES`` names (the workers benchmark's default: 127.0.0.1:5432) when it answers,
    else empty (measured on SQLite only)."""
    url = os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432")
    if not url:  # set empty: SQLite only
        return ""
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=3).close()
    except Exception:
        return ""
    return url


@contextmanager
def fresh_database(url: str, tag: str = "") -> Iterator[str]:
    """A new, empty database on the PostgreSQL server ``url`` names, dropped afterwards: its URL (``tag``: to tell
    apart two made in the same second by one process)."""
    import urllib.parse

    import psycopg

    name = f"bench_whole_{os.getpid()}_{int(time.time())}{tag}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urllib.parse.urlsplit(url)
    try:
        yield urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def profile_rows(stacks: Path) -> list[Result]:
    """Where the server's CPU goes: the largest shares of py-spy's samples (GIL held), by module and by function."""
    out = [
        Result(
            name=f"CPU share, module {module}",
            figure=share * 100,
            unit="%",
            digits=1,
            summary=False,
            notes="each sample counted once, for the innermost of the project's modules in its stack: that module's "
            "code and what it calls outside the project (Django, SQLite, the SDKs); "
            f"{PROFILE_RUNS * 2} runs at zero latency, half streamed, py-spy --gil at 250 Hz"
            if i == 0
            else "",
        )
        for i, (module, share) in enumerate(spy.top_modules(stacks, 10))
    ]
    out += [
        Result(
            name=f"CPU share, function {frame}",
            figure=share * 100,
            unit="%",
            digits=1,
            summary=False,
            notes="inclusive: the function and everything it calls (so the shares overlap)" if i == 0 else "",
        )
        for i, (frame, share) in enumerate(spy.top_frames(stacks, 16))
    ]
    return out


@benchmark("Whole server against the peer: CPU, wall, first call, overhead", order=70)
def whole_server() -> list[Result]:
    """The real server (daphne, `assistant.asgi`, debug off, SQLite in a temporary folder, the catalogue
    and the demo organisation loaded, in-memory channel layer, the embedded executor) with
    `OPENAI_BASE_URL` pointing at `bench/scripted.py`, a scripted server of our own speaking OpenAI's
    chat-completions wire protocol (server-sent events with tool-call arguments split across chunks,
    a last chunk with the usage and its cached tokens; JSON when not streamed) in a process of its own,
    waiting a fixed latency before each answer and logging each request's arrival. Scenario: the main
    model (`gpt-4.1`) delegates two tasks in one `agents` call; each agent (the cheapest model the
    `agents` tool offers, `gpt-4o-mini`) calls `kb_search`, `kb_read` of the hits, `submit_result`;
    the main model answers: 8 model requests a run. It is driven through `POST /v1/chat/completions`
    by the official `openai` client, one run at a time. The peer (`bench/peer.py`: OpenAI Agents SDK
    0.24, `OpenAIChatCompletionsModel`, tracing disabled, a lead with two agents as tools doing the
    same search, read, submit and answer, no persistence, in `.venv-peer`) runs on the same scripted
    server in the same benchmark: the four kinds of runs (ours streamed, ours not, the peer's not
    streamed, the peer's streamed) take turns, 16 of each at zero latency (after 2 warm-ups of each)
    then 6 of each at 0.3 s a call, so that the load of the machine's neighbours weighs on all alike.
    CPU: the process tree's user + system time (`/proc/<pid>/stat`, every thread; the peer's own
    process) over each run, summed, ÷ the model requests the scripted server logged during those
    runs. Wall: from the client sending the request (an `httpx` request hook) to the response's end,
    median. First model call: from that send to the scripted server receiving the run's first
    request. At 0.3 s a call the critical path is 5 calls (main, an agent's 3, main) = 1.5 s;
    overhead = wall − 1.5 s, efficiency = 1.5 s ÷ wall. When `BENCH_POSTGRES` names a PostgreSQL
    that answers, everything is measured again with the server on a new database there (`DATABASE_URL`, created
    for the benchmark and dropped after it)."""
    model = scripted.spawn()
    stacks = Path(tempfile.gettempdir()) / f"bench-whole-{os.getpid()}.txt"
    try:
        out = rows(measure(model, profile=stacks if spy.available() else None))
        if stacks.exists():
            out += profile_rows(stacks)
            stacks.unlink()
        else:
            why = (
                "py-spy could not record the server (ptrace refused?)" if spy.available() else "py-spy is not installed"
            )
            out.append(Result(name="CPU profile", figure=0, notes=f"not recorded: {why}"))
        pg = _postgres()
        if pg:
            with fresh_database(pg) as database:
                out += rows(measure(model, database), suffix=" (PostgreSQL)")
    finally:
        model.stop()
    if not PEER_PYTHON.exists():
        out.append(Result(name="Peer", figure=0, notes="not measured: .venv-peer is missing (`make bench` creates it)"))
    return out
