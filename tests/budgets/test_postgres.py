"""On PostgreSQL (``make test`` runs these with DATABASE_URL): the same contention as on SQLite, and the
same conditional UPDATE serialised by the row lock, with threads and with processes."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import Client
from django.utils import timezone, translation

from assistant.budgets import spend
from assistant.runs import intake
from assistant.runs.models import Run
from assistant.runs.start import RunStart
from tests.budgets.budgets_support import QUESTION, World, hammer, this_month
from tests.budgets.test_reservation import check_no_overshoot, contend, room_for_five
from tests.budgets.test_spend_limits import check_runs_within, check_threads, first_call_eur, member_limit

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgresql() -> None:
    assert connection.vendor == "postgresql", "these tests need DATABASE_URL=postgres://…"


def database_env() -> dict[str, str]:
    """The environment that points a child process at this run's PostgreSQL test database."""
    s = connection.settings_dict
    auth = quote(s["USER"]) + (f":{quote(s['PASSWORD'])}" if s["PASSWORD"] else "")
    url = f"postgres://{auth}@{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"
    return {**os.environ, "DATABASE_URL": url, "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend"}


def test_twenty_threads_in_this_process(tworld: World) -> None:
    category = room_for_five(tworld.administration)
    attempts = hammer(category.pk, 20, 1_000, spend=lambda i: 1_000)
    assert sum(a.reserved for a in attempts) == 5
    assert max(a.seen_after for a in attempts if a.reserved) <= 5_000
    row = this_month(category)
    assert (row.used, row.reserved, row.calls) == (5_000, 0, 5)


def test_twenty_requests_across_two_processes(tworld: World) -> None:
    category = room_for_five(tworld.administration)
    check_no_overshoot(contend("processes", category, database_env(), varied=True), varied=True)


def test_twenty_threads_never_overshoot_a_member_s_hard_cap(tworld: World) -> None:
    check_threads(tworld)


async def test_twenty_concurrent_requests_against_a_member_s_hard_cap(tworld: World, fast_demo: None) -> None:
    """Twenty requests at the same instant, each on its own connection: the hard cap's room for about five is
    admitted at intake, the rest refused before anything is saved; the admitted ones all run at once and what they
    spend never passes the limit."""
    limit = round(5.5 * first_call_eur(), 2)
    await sync_to_async(member_limit)(tworld, str(limit))
    ask = intake.Ask(text=QUESTION["text"], model="demo-large", level="rapide", resources=())
    barrier = threading.Barrier(20)

    def attempt(i: int) -> RunStart | spend.SpendExhausted:
        try:
            barrier.wait(timeout=30)
            with translation.override("en"):
                return intake.create_run(tworld.member, tworld.demo, None, ask)
        except spend.SpendExhausted as e:
            return e
        finally:
            connection.close()

    with ThreadPoolExecutor(20) as pool:
        attempts = list(pool.map(attempt, range(20)))
    created = [a for a in attempts if isinstance(a, RunStart)]
    assert 5 <= len(created) < 20
    assert await Run.objects.acount() == len(created)
    await check_runs_within(tworld, created, limit)


def test_the_usage_csv_is_built_in_a_child_process_as_in_the_server_s(tworld: World) -> None:
    """On a database another process reads (PostgreSQL, the rows committed), the usage CSV's download is built by its
    child process (issue 34: off the server's interpreter): the same bytes as built in the process, the organisation's
    runs only, its text cells kept from formulas."""
    from assistant.budgets.csv_export import csv_from_child
    from assistant.budgets.months import month_of, zone
    from assistant.budgets.usage_csv import usage_csv
    from tests.budgets.test_pages import _run

    runs = [_run(tworld.demo, "syntheses", 1_000 + n, 0.001 * n) for n in range(5)]
    tworld.member.username = "=HYPERLINK(1)"
    tworld.member.save()
    Run.objects.filter(pk=runs[0].pk).update(user=tworld.member)
    _run(tworld.other, "obsidian", 4_000, 0.2)
    month = month_of(timezone.now(), zone(tworld.demo.time_zone))
    made = csv_from_child(tworld.demo, month)
    assert made is not None and made == usage_csv(tworld.demo, month).encode()
    lines = made.decode().splitlines()
    assert len(lines) == 1 + len(runs) and sum("'=HYPERLINK(1)" in line for line in lines) == 1
    client = Client()
    client.force_login(tworld.admin)
    assert client.get("/settings/usage.csv").content == made  # the worker kept from the first CSV
