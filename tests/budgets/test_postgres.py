"""On PostgreSQL (``make test`` runs these with DATABASE_URL): the same contention as on SQLite, and the
same conditional UPDATE serialised by the row lock, with threads and with processes."""

from __future__ import annotations

import os
from urllib.parse import quote

import pytest
from budgets_support import World, hammer, this_month
from django.db import connection
from test_reservation import check_no_overshoot, contend, room_for_five

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
