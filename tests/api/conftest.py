"""A real server (daphne, through `manage.py runserver`) on a free port with its own database, as the
browser tests run it (tests/e2e), and the official ``openai`` client pointed at it.

The server's database holds the demo data and a second organisation, ``other``, whose assistant is
restricted to one model and which has a knowledge base of its own (``secrets``) and one with the
demo's slug (``factures``). The keys the tests use are created before the server starts and
handed over through a JSON file: they are printed once, like any key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.api.api_support import Live
from tests.live_server import start_server

# Agents take about a second: time to cancel a run mid-way, quick enough for CI.
DEMO_PACE = "0.002"
DEMO_LATENCY = "0.3"

SERVER = """
import json, sys
from decimal import Decimal
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
# An organisation whose one category is nearly spent: room for a few requests at once (tests/api/test_budgets.py).
from django.utils import timezone
from assistant.budgets import state
from assistant.budgets.months import month_of, zone
budgeted = Organisation.objects.create(name="Budgeted Company", slug="budgeted")
syntheses = Category.objects.create(
    organisation=budgeted, slug="syntheses", name="Synthèses", monthly_tokens=16_000, is_default=True
)
row = state.month_row(syntheses, month_of(timezone.now(), zone(budgeted.time_zone)))
row.used = 2_318
row.save()
made = {
    "budgeted": keys.create_key(budgeted, "budgeted")[1],
    "demo": keys.create_key(demo, "all models")[1],
    "small": keys.create_key(demo, "small only", ["demo-small"])[1],
    "other": keys.create_key(other, "other's key")[1],
    # A hard cap of 0.01 EUR a month: room for three first calls of demo-small at once (tests/api/test_budgets.py).
    "capped": keys.create_key(demo, "capped", monthly_eur=Decimal("0.01"))[1],
}
revoked, made["revoked"] = keys.create_key(demo, "revoked")
keys.revoke(revoked)
with open(sys.argv[2], "w") as f:
    json.dump(made, f)
call_command("runserver", sys.argv[1], use_reloader=False)
"""


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    folder = tmp_path_factory.mktemp("api")
    keys_path = folder / "keys.json"
    # Every test of the folder shares the server and its keys: a key's own rate limit is not theirs to meet
    # (test_key_limits.py tests it).
    environ = {"API_KEY_RATE_LIMIT": "100000"}
    with start_server(SERVER, folder, str(keys_path), pace=DEMO_PACE, latency=DEMO_LATENCY, env=environ) as server:
        server.wait_until_up()
        yield Live(server.url, json.loads(keys_path.read_text()), database=folder / "db.sqlite3")


@pytest.fixture(autouse=True)
def _close_clients(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "live" in request.fixturenames:
        request.getfixturevalue("live").close()
