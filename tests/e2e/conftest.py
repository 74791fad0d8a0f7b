"""A real server (daphne, through `manage.py runserver`) on a free port, with its own database and the
demo data, and a headless Chromium driven by Playwright. Screenshots go to artifacts/."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Slow enough to watch a run live (agents take ~1.5 s, the answer streams for a second or more), quick enough for CI.
DEMO_PACE = "0.01"
DEMO_LATENCY = "0.4"

# A document whose sentences the demo model quotes: its markup must show as text, never run.
HOSTILE_TITLE = "Note — Zorglub"
HOSTILE_TEXT = (
    'Zorglub paid with a script <script>window.__pwned = "script"</script> in the memo. '
    "Zorglub also sent an image <img src=x onerror=\"window.__pwned = 'onerror'\"> by mail."
)

SERVER = f"""
import sys
import django
django.setup()
from django.core.management import call_command
from assistant.knowledge.models import Document, KnowledgeBase
call_command("migrate", verbosity=0)
call_command("load_demo", verbosity=0)
kb = KnowledgeBase.objects.get(organisation__slug="demo", slug="factures")
Document.objects.create(knowledge_base=kb, title={HOSTILE_TITLE!r}, text={HOSTILE_TEXT!r})
call_command("runserver", sys.argv[1], use_reloader=False)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """One process migrates a fresh database, loads the demo data, then serves (daphne's runserver)."""
    folder = tmp_path_factory.mktemp("e2e")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "assistant.settings",
        "SQLITE_PATH": str(folder / "db.sqlite3"),
        "DATABASE_URL": "",
        "DJANGO_DEBUG": "1",  # runserver serves the static files (htmx from django-htmx, the app's css/js)
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DEMO_PACE": DEMO_PACE,
        "DEMO_LATENCY": DEMO_LATENCY,
        "PYTHONUNBUFFERED": "1",
    }
    port = _free_port()
    log_path = folder / "server.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", SERVER, f"127.0.0.1:{port}"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            yield process, port, log_path
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def server(server_process: tuple[subprocess.Popen[bytes], int, Path], browser: Any) -> str:
    """The server's address, once it answers (the browser starts meanwhile)."""
    process, port, log_path = server_process
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return f"http://127.0.0.1:{port}"
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start:\n" + log_path.read_text()) from None
            time.sleep(0.1)


@pytest.fixture(scope="session")
def browser(server_process: object) -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("REQUIRE_BROWSER"):
            pytest.fail(f"{CHROMIUM} is missing (apt-get install -y chromium)")
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def signed_in(browser: Any, server: str) -> dict[str, Any]:
    """Sign in once through the login page; each test's context starts from these cookies."""
    context = browser.new_context(base_url=server)
    page = context.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", "demo")
    page.fill("input[name=password]", "demo-password")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{server}/")
    state: dict[str, Any] = context.storage_state()
    context.close()
    return state


@pytest.fixture
def page(browser: Any, server: str, signed_in: dict[str, Any]) -> Iterator[Any]:
    """A fresh signed-in English browser tab on a new chat; the page must raise no script error."""
    context = browser.new_context(
        base_url=server, storage_state=signed_in, viewport={"width": 1280, "height": 900}, locale="en-GB"
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/")
    yield page
    context.close()
    assert not errors, errors


@pytest.fixture
def shot(page: Any) -> Callable[[str], None]:
    """``shot("name")`` saves a full-page screenshot as artifacts/name.png."""

    def save(name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    return save
