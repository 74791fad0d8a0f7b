"""A real server (daphne, through `manage.py runserver`) on a free port, with its own database and the
demo data, and a headless Chromium driven by Playwright. Screenshots go to artifacts/."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live_server import ROOT, LiveServer, sign_in, start_server

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


@pytest.fixture(scope="session")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One process migrates a fresh database, loads the demo data, then serves (daphne's runserver)."""
    # With debug on, runserver serves the static files (htmx from django-htmx, the app's css/js).
    folder = tmp_path_factory.mktemp("e2e")
    env = {"DJANGO_DEBUG": "1", "MEDIA_ROOT": str(folder / "media")}  # uploads stay out of the checkout
    with start_server(SERVER, folder, pace=DEMO_PACE, latency=DEMO_LATENCY, env=env) as server:
        yield server


@pytest.fixture(scope="session")
def server(server_process: LiveServer, browser: Any) -> str:
    """The server's address, once it answers (the browser starts meanwhile)."""
    return server_process.wait_until_up()


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
    sign_in(page, server)
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
