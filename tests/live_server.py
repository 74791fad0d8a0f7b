"""A real server (daphne, through `manage.py runserver`) on a free port, for the tests that use the app from
outside it: the API through the official ``openai`` client (tests/api) and the browser tests (tests/e2e).

``script`` is Python run in the server's process: it prepares its own SQLite database (migrate, demo data,
whatever the tests need) and then calls ``runserver`` on ``sys.argv[1]``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]


class DemoSpeed(TypedDict):
    """``start_server``'s demo model speed, as a test passes it whole (``**SLOW``)."""

    pace: str
    latency: str


DEMO_SERVER = """
import sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
call_command("load_demo", verbosity=0)
call_command("runserver", sys.argv[1], use_reloader=False)
"""
"""A server's ``script`` with the demo data alone, as ``make run`` loads it."""


def sign_in(page: Any, url: str) -> None:
    """Sign ``page`` in as the demo user through the login page of the server at ``url``."""
    page.goto("/login/")
    page.fill("input[name=username]", "demo")
    page.fill("input[name=password]", "demo-password")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{url}/")


@dataclass
class LiveServer:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_until_up(self, timeout: float = 100) -> str:
        """The server's address, once it accepts connections; its log if it died or never answered. Its migrations
        and demo data took over 60 s on a loaded machine (2 cores, load 10): it is given 100 s, within the test's
        120 s (pytest-timeout), so that a server that never starts still says why."""

        def up() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError("the server died:\n" + self.log_path.read_text())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            except OSError:
                return False
            return True

        wait_until(up, lambda: "the server to start:\n" + self.log_path.read_text(), seconds=timeout)
        return self.url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def start_server(
    script: str,
    folder: Path,
    *args: str,
    pace: str,
    latency: str,
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> Iterator[LiveServer]:
    """Start ``script`` serving on a free port (or ``port``: a server started again where another one stopped)
    with its database in ``folder``; stop it at the end.

    ``pace`` and ``latency`` set the demo model's speed; ``env`` adds to the environment.
    """
    environ = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "assistant.settings",
        "SQLITE_PATH": str(folder / "db.sqlite3"),
        "MEDIA_ROOT": str(folder / "media"),  # stored files (the demo's table, uploads) stay out of the checkout
        "DATABASE_URL": "",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DEMO_PACE": pace,
        "DEMO_LATENCY": latency,
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    port = port or free_port()
    log_path = folder / "server.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", script, f"127.0.0.1:{port}", *args],
            cwd=ROOT,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield LiveServer(process, port, log_path)
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)  # Daphne's shutdown, slower on a loaded machine
            except subprocess.TimeoutExpired:
                process.kill()  # its shutdown is not what the test checks
                process.wait()
