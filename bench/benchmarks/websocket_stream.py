"""50 chats streaming at once through one server process, to 50 websocket clients."""

from __future__ import annotations

import asyncio
import http.cookiejar
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect

from ..fixtures import median, percentile
from ..registry import Result, below, benchmark

CHATS = 50
REPETITIONS = 3
ROOT = Path(__file__).resolve().parents[2]
QUESTION = {
    "text": "Bimbamjob: invoices, payments and relationship",
    "model": "demo-large",
    "level": "approfondi",
    "resources": ["kb:factures", "kb:comptes-rendus", "agents"],
}
SETUP = f"""
import django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from assistant.runs.models import Conversation
from assistant.orgs.models import Organisation
call_command("migrate", verbosity=0)
call_command("load_demo", verbosity=0)
user = get_user_model().objects.get(username="demo")
org = Organisation.objects.get(slug="demo")
for i in range({CHATS + 1}):
    print(Conversation.objects.create(organisation=org, user=user, title=f"bench {{i}}").pk)
"""
EMITTED = re.compile(r'data-emitted="([0-9.]+)"')


@dataclass
class Chat:
    """One websocket client on one conversation: when each frame's oldest new text left the engine."""

    conversation: int
    delays: list[float] = field(default_factory=list)
    frames: int = 0
    finished: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Repetition:
    """One server, 50 chats: the delays (ms) of their answer frames, and the server's memory (KiB)."""

    delays: list[float]
    frames: int
    rss_before: int
    rss_after: int
    peak: int
    load: float

    @property
    def p95(self) -> float:
        return percentile(self.delays, 95)


@benchmark("Live chat: 50 concurrent streams over websockets", order=60)
async def websocket_stream() -> list[Result]:
    """One server process (daphne, `assistant.asgi`, in-memory channel layer, SQLite in a temporary
    folder, the demo data) and one client process on the same machine. The client signs in, opens 50
    websockets (`/ws/c/<id>/`, one per conversation, as 50 open chat pages), then posts 50 messages at
    once (two knowledge bases and agents, level Approfondi, as the composer does with htmx), so that
    50 runs delegate to 2 agents each and stream their answers from the offline demo provider at full
    speed (`DEMO_PACE=0`, `DEMO_LATENCY=0`). Delay: the run's recorder stamps each event with
    `time.monotonic()` as it leaves the engine; each pushed answer fragment carries the stamp of the
    oldest text it adds (`data-emitted`), and the client subtracts it from `time.monotonic()` when the
    frame arrives (the same clock: same machine). So each figure is the delay of the *oldest* token
    in a frame, an upper bound for the others it carries. Memory: the server's resident set size
    (`/proc/<pid>/status`) after one warm-up chat, and again after the 50 runs with their 50 sockets
    still open; the difference divided by 50. Three repetitions, each with a fresh server and
    database; the table gives the repetition of median p95 (the machine is shared: a neighbour's
    load shows in the tail), the notes the three p95s."""
    repetitions = [await _repetition() for _ in range(REPETITIONS)]
    chosen = sorted(repetitions, key=lambda r: r.p95)[len(repetitions) // 2]
    delays, rss_before, rss_after = chosen.delays, chosen.rss_before, chosen.rss_after
    return [
        Result(
            name="Token to browser delay, median",
            figure=median(delays),
            unit="ms",
            notes=f"{len(delays):,} answer frames over {CHATS} chats ({chosen.frames:,} frames in all)",
        ),
        Result(
            name="Token to browser delay, p95",
            figure=chosen.p95,
            unit="ms",
            target=below(50),
            notes=f"max {max(delays):,.1f} ms; the {REPETITIONS} repetitions' p95: "
            + ", ".join(f"{r.p95:,.1f} ms" for r in repetitions)
            + f"; load average {chosen.load:.1f} on {os.cpu_count()} cores when it started",
        ),
        Result(
            name="Server memory per open chat",
            figure=(rss_after - rss_before) / CHATS,
            unit="KiB",
            notes=f"RSS {rss_before / 1024:,.1f} → {rss_after / 1024:,.1f} MiB with {CHATS} chats done and open; "
            f"peak while streaming {chosen.peak / 1024:,.1f} MiB ({(chosen.peak - rss_before) / CHATS:,.0f} KiB a chat)",
            digits=0,
        ),
    ]


async def _repetition() -> Repetition:
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "assistant.settings",
            "SQLITE_PATH": str(Path(folder) / "db.sqlite3"),
            "DATABASE_URL": "",
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": "bench-only",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "DJANGO_SECURE_COOKIES": "false",  # plain HTTP on 127.0.0.1
            "DEMO_PACE": "0",
            "DEMO_LATENCY": "0",
            "LOG_LEVEL": "WARNING",
        }
        made = subprocess.run(
            [sys.executable, "-c", SETUP], cwd=ROOT, env=env, check=True, capture_output=True, text=True
        )
        conversations = [int(line) for line in made.stdout.split() if line.isdigit()]
        port = _free_port()
        log = (Path(folder) / "server.log").open("w")
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "assistant.server",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "assistant.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            await _wait_for(port, server)
            session = await asyncio.to_thread(_Session, f"http://127.0.0.1:{port}")
            warm, rest = conversations[0], conversations[1 : CHATS + 1]
            await _chats(session, port, [warm])
            rss_before = _rss(server.pid)
            chats, peak, sockets = await _chats(session, port, rest, server_pid=server.pid)
            rss_after = _rss(server.pid)
            for ws in sockets:
                await ws.close()
        finally:
            server.terminate()
            server.wait(timeout=10)
            log.close()
    return Repetition(
        delays=[d * 1000 for chat in chats for d in chat.delays],
        frames=sum(chat.frames for chat in chats),
        rss_before=rss_before,
        rss_after=rss_after,
        peak=peak,
        load=load,
    )


async def _chats(
    session: _Session, port: int, conversations: list[int], server_pid: int | None = None
) -> tuple[list[Chat], int, list[ClientConnection]]:
    """Open a socket per conversation, post a message in each at once, wait for every run's end."""
    chats = [Chat(pk) for pk in conversations]
    sockets = [
        await connect(
            f"ws://127.0.0.1:{port}/ws/c/{chat.conversation}/",
            additional_headers={"Cookie": session.cookie_header()},
            origin=f"http://127.0.0.1:{port}",  # type: ignore[arg-type]
            max_size=None,
        )
        for chat in chats
    ]
    readers = [asyncio.ensure_future(_read(ws, chat)) for ws, chat in zip(sockets, chats, strict=True)]
    peak = 0
    await asyncio.gather(*(asyncio.to_thread(session.send, chat.conversation) for chat in chats))
    async with asyncio.timeout(300):
        while not all(chat.finished.is_set() for chat in chats):
            if server_pid is not None:
                peak = max(peak, _rss(server_pid))
            await asyncio.sleep(0.05)
    for reader in readers:
        reader.cancel()
    return chats, peak, sockets


async def _read(ws: ClientConnection, chat: Chat) -> None:
    async for frame in ws:
        now = time.monotonic()
        assert isinstance(frame, str)
        chat.frames += 1
        stamp = EMITTED.search(frame)
        if stamp is not None:
            chat.delays.append(now - float(stamp.group(1)))
        if '<article class="answer" id="run-' in frame and 'data-status="ok"' in frame and "hx-swap-oob" not in frame:
            chat.finished.set()


class _Session:
    """A signed-in browser, as far as HTTP goes: cookies and the CSRF token."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.opener.open(f"{base}/login/").read()
        self._post("/login/", {"username": "demo", "password": "demo-password"})

    def _csrf(self) -> str:
        return next(c.value or "" for c in self.jar if c.name == "csrftoken")

    def _post(self, path: str, data: dict[str, object], htmx: bool = False) -> str:
        body = urllib.parse.urlencode({**data, "csrfmiddlewaretoken": self._csrf()}, doseq=True).encode()
        headers = {"Referer": f"{self.base}/", **({"HX-Request": "true"} if htmx else {})}
        request = urllib.request.Request(f"{self.base}{path}", body, headers=headers)
        with self.opener.open(request) as response:
            return str(response.read().decode())

    def send(self, conversation: int) -> None:
        self._post(f"/c/{conversation}/send", dict(QUESTION), htmx=True)  # as the page's composer does

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)


async def _wait_for(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start") from None
            await asyncio.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _rss(pid: int) -> int:
    """Resident set size in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")
