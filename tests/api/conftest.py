"""A real server (daphne, through `manage.py runserver`) on a free port with its own database, as the
browser tests run it (tests/e2e), and the official ``openai`` client pointed at it.

The server's database holds the demo data and a second organisation, ``other``, whose assistant is
restricted to one model and which has a knowledge base of its own (``secrets``) and one with the
demo's slug (``factures``). The keys the tests use are created before the server starts and
handed over through a JSON file: they are printed once, like any key.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_support import Live

ROOT = Path(__file__).resolve().parents[2]
# Agents take about a second: time to cancel a run mid-way, quick enough for CI.
DEMO_PACE = "0.002"
DEMO_LATENCY = "0.3"

SERVER = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from assistant.budgets.models import Category
from assistant.knowledge.models import Document, KnowledgeBase
from assistant.orgs import keys
from assistant.orgs.models import Organisation
call_command("migrate", verbosity=0)
call_command("load_demo", verbosity=0)
demo = Organisation.objects.get(slug="demo")
# A category with no room: its requests are refused (429).
Category.objects.create(organisation=demo, slug="tiny", name="Tiny", monthly_tokens=1, position=9)
other = Organisation.objects.create(name="Other Company", slug="other", allowed_models=["demo-small"])
for slug in ("secrets", "factures"):
    kb = KnowledgeBase.objects.create(organisation=other, slug=slug, name=slug.title())
    Document.objects.create(knowledge_base=kb, title="Vault", text="Bimbamjob code OBSIDIAN-42.")
made = {
    "demo": keys.create_key(demo, "all models")[1],
    "small": keys.create_key(demo, "small only", ["demo-small"])[1],
    "other": keys.create_key(other, "other's key")[1],
}
revoked, made["revoked"] = keys.create_key(demo, "revoked")
keys.revoke(revoked)
with open(sys.argv[2], "w") as f:
    json.dump(made, f)
call_command("runserver", sys.argv[1], use_reloader=False)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    folder = tmp_path_factory.mktemp("api")
    keys_path = folder / "keys.json"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "assistant.settings"),
        "SQLITE_PATH": str(folder / "db.sqlite3"),
        "DATABASE_URL": "",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DEMO_PACE": DEMO_PACE,
        "DEMO_LATENCY": DEMO_LATENCY,
        "PYTHONUNBUFFERED": "1",
    }
    port = _free_port()
    log_path = folder / "server.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", SERVER, f"127.0.0.1:{port}", str(keys_path)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("the server did not start:\n" + log_path.read_text()) from None
                    time.sleep(0.1)
            yield Live(f"http://127.0.0.1:{port}", json.loads(keys_path.read_text()))
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture(autouse=True)
def _close_clients(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "live" in request.fixturenames:
        request.getfixturevalue("live").close()
