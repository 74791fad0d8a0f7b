"""Another user's pages while one user's long requests run: the real server, a second organisation's user
loading pages in a loop, and each page's time from the client's side.

Shared by the benchmarks that ask whether one user can stall the server for the others (``uploads``,
``long_requests``). The server is started as ``make run`` starts it (``manage.py runserver``, Daphne, debug on,
SQLite in a temporary folder, the catalogue and the demo data), with ``SEED`` run first; the demo user
(``demo`` / ``demo-password``) is the one whose requests are long, the other one (``other`` / ``other-password``,
a member of the organisation ``other``) loads ``PAGES`` one after the other, 50 ms apart, from a client process
of its own (``Pages``): the benchmark's own work, sending 19 MB, does not share its interpreter.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .fixtures import percentile

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("/", "/kb/")
PAUSE = 0.05
SERVER = """
import sys
import django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from assistant.orgs.models import Membership, Organisation
call_command("migrate", verbosity=0)
call_command("load_catalogue", verbosity=0)
call_command("load_demo", verbosity=0)
other = Organisation.objects.create(name="Other", slug="other")
Membership.objects.create(
    organisation=other, user=get_user_model().objects.create_user("other", password="other-password"), role="member"
)
{seed}
call_command("runserver", sys.argv[1], use_reloader=False)
"""


def load() -> str:
    """The machine's load average now (1, 5, 15 min), as ``uptime`` shows it."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    folder: Path

    def client(self, username: str, password: str) -> Any:
        """A client signed in as ``username`` (cookies and CSRF token kept)."""
        import httpx2

        client = httpx2.Client(base_url=self.url, timeout=300)
        client.get("/login/")
        signed = client.post(
            "/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": client.cookies["csrftoken"]},
            headers={"Referer": f"{self.url}/login/"},
        )
        if signed.status_code != 302:
            raise RuntimeError(f"{username} could not sign in: {signed.status_code}")
        return client

    def post(self, client: Any, path: str, **kwargs: Any) -> Any:
        data = {"csrfmiddlewaretoken": client.cookies["csrftoken"], **kwargs.pop("data", {})}
        return client.post(path, data=data, headers={"Referer": f"{self.url}{path}"}, **kwargs)


@contextmanager
def serve(seed: str = "", env: dict[str, str] | None = None, root: Path = ROOT) -> Iterator[Served]:
    """The server, ``seed`` run before it serves; ``root``: the source tree it runs from (another checkout, to
    compare two versions)."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        port = _free_port()
        environ = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "assistant.settings",
            "SQLITE_PATH": str(folder / "db.sqlite3"),
            "MEDIA_ROOT": str(folder / "media"),
            "DATABASE_URL": "",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "REDIS_URL": "",
            "LOG_LEVEL": "WARNING",
            **(env or {}),
        }
        log_path = folder / "server.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                [sys.executable, "-c", SERVER.format(seed=seed), f"127.0.0.1:{port}"],
                cwd=root,
                env=environ,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                deadline = time.monotonic() + 300
                while True:
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                        break
                    except OSError:
                        if process.poll() is not None or time.monotonic() > deadline:
                            raise RuntimeError(f"the server did not start:\n{log_path.read_text()[-3000:]}") from None
                        time.sleep(0.2)
                yield Served(f"http://127.0.0.1:{port}", process, folder)
            finally:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# The other user's client: a process of its own, so that the benchmark's own work (sending 19 MB) does not share
# its interpreter; it prints each page's start (time.monotonic(), the same clock in every process) and time.
CLIENT = """
import sys, time
import httpx2
url, pages, pause = sys.argv[1], sys.argv[2].split(","), float(sys.argv[3])
client = httpx2.Client(base_url=url, timeout=300)
client.get("/login/")
signed = client.post("/login/", data={"username": "other", "password": "other-password",
    "csrfmiddlewaretoken": client.cookies["csrftoken"]}, headers={"Referer": url + "/login/"})
assert signed.status_code == 302, signed.status_code
print("ready", flush=True)
n = 0
while True:
    path = pages[n % len(pages)]
    n += 1
    started = time.monotonic()
    status = client.get(path).status_code
    print(started, time.monotonic() - started, status, flush=True)
    time.sleep(pause)
"""


@dataclass
class Pages:
    """The other user's page loads, in a process of its own: (start, seconds) of each."""

    url: str
    times: list[tuple[float, float]] = field(default_factory=list)
    _process: subprocess.Popen[str] | None = None
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", CLIENT, self.url, ",".join(PAGES), str(PAUSE)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() != "ready":
            raise RuntimeError("the other user could not sign in")
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=15)
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            started, seconds, status = line.split()
            if status != "200":
                raise RuntimeError(f"a page answered {status}")
            self.times.append((float(started), float(seconds)))

    def between(self, start: float, end: float) -> list[float]:
        """The times (ms) of the pages requested from ``start`` to ``end``."""
        return [seconds * 1000 for at, seconds in list(self.times) if start <= at <= end]

    def baseline(self, seconds: float) -> list[float]:
        """Pages alone for ``seconds``: their times (ms)."""
        start = time.monotonic()
        time.sleep(seconds)
        return self.between(start, time.monotonic())

    def during(self, work: Callable[[], object]) -> tuple[list[float], float]:
        """The times (ms) of the pages served while ``work()`` ran (each page whose time overlapped it: requested
        before it ended and answered after it began), and how long it took (s). A page still being served when it
        ends is waited for: the slowest pages are those."""
        start = time.monotonic()
        work()
        end = time.monotonic()
        deadline = end + 60
        while not any(at > end for at, _ in list(self.times)) and time.monotonic() < deadline:
            time.sleep(0.01)  # the client reports a page once it is served, in order: one requested after the end
        return [seconds * 1000 for at, seconds in list(self.times) if at <= end and at + seconds >= start], end - start


def p95(values: list[float]) -> float:
    return percentile(values, 95) if values else float("nan")
