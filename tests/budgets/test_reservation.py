"""The reservation before each call is atomic: concurrent requests never overshoot a category's budget.

The contention is real: 20 threads or 20 processes, each with its own connection, against a file
copy of the test database configured as the server runs SQLite (WAL, busy timeout); the same runs
against PostgreSQL in ``test_postgres``. (A copy, so that the processes never touch the test database
the other tests use.)
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from assistant.budgets import reservations
from assistant.budgets.models import Category, Reservation
from assistant.engine.errors import BudgetExceeded
from tests.budgets.budgets_support import World, this_month, use

pytestmark = pytest.mark.django_db(transaction=True)

CONTEND = Path(__file__).with_name("contend.py")


def room_for_five(category: Category) -> Category:
    category.monthly_tokens = 5_000
    category.save()
    return category


def contend(mode: str, category: Category, env: dict[str, str], *, varied: bool = False) -> dict[str, Any]:
    command = [
        sys.executable,
        str(CONTEND),
        mode,
        "--category",
        str(category.pk),
        "--workers",
        "20",
        "--processes",
        "2",
        "--tokens",
        "1000",
    ]
    done = subprocess.run(
        [*command, *(["--varied"] if varied else [])], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def check_no_overshoot(result: dict[str, Any], *, varied: bool) -> None:
    attempts = result["attempts"]
    assert len(attempts) == 20
    held = [a for a in attempts if a["reserved"]]
    # Never more held (used + reserved) than the budget, at any reservation.
    assert max(a["seen_after"] for a in held) <= 5_000
    assert result["reserved"] == 0 and result["used"] <= 5_000
    assert result["calls"] == len(held)
    if varied:
        assert len(held) >= 5  # what a call does not use goes back to the category
    else:
        assert len(held) == 5 and result["used"] == 5_000


def sqlite_file_env(tmp_path: Path) -> dict[str, str]:
    """A file copy of the (committed) test database, and the environment that points Django at it."""
    path = tmp_path / "contend.sqlite3"
    connection.ensure_connection()
    target = sqlite3.connect(path)
    connection.connection.backup(target)
    target.execute("PRAGMA journal_mode=WAL")
    target.close()
    env = {**os.environ, "SQLITE_PATH": str(path), "DATABASE_URL": ""}
    env["EMAIL_BACKEND"] = "django.core.mail.backends.locmem.EmailBackend"
    return env


@pytest.fixture
def on_sqlite() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL run has its own versions in test_postgres")


@pytest.mark.parametrize(
    ("mode", "varied"),
    [("threads", False), ("threads", True), ("processes", True)],
    ids=["threads-spend-all", "threads-spend-less", "processes-spend-less"],
)
def test_twenty_concurrent_requests_against_room_for_five(
    tworld: World, tmp_path: Path, on_sqlite: None, mode: str, varied: bool
) -> None:
    category = room_for_five(tworld.administration)
    check_no_overshoot(contend(mode, category, sqlite_file_env(tmp_path), varied=varied), varied=varied)


def test_a_reservation_that_does_not_fit_is_refused_and_holds_nothing(tworld: World) -> None:
    category = room_for_five(tworld.administration)
    use(category, 4_500)
    with pytest.raises(BudgetExceeded):
        reservations.reserve(category.pk, 501)
    reservation = reservations.reserve(category.pk, 500)
    row = this_month(category)
    assert (row.used, row.reserved) == (4_500, 500)
    reservations.settle(reservation, 120, 0.5)
    row.refresh_from_db()
    assert (row.used, row.reserved, row.calls) == (4_620, 0, 2)
    assert row.cost_eur == pytest.approx(0.5)


def test_a_hold_left_by_a_dead_process_is_released_and_never_twice(tworld: World) -> None:
    category = room_for_five(tworld.administration)
    # Mid-month: an hour before the first hour of a month, the dead hold would sit in the month before.
    now = timezone.now().replace(day=15, hour=12)
    dead = reservations.reserve(category.pk, 5_000, now - reservations.STALE_AFTER - timedelta(minutes=1))
    # The month is full of a hold whose call never settled: the next reservation releases it.
    fresh = reservations.reserve(category.pk, 1_000, now)
    row = this_month(category, now)
    assert (row.used, row.reserved) == (0, 1_000)
    assert list(Reservation.objects.values_list("pk", flat=True)) == [fresh.pk]
    # Should the old call settle after all, what it used is charged, its hold is not released twice.
    reservations.settle(dead, 300, 0.0, now)
    reservations.settle(fresh, 200, 0.0, now)
    row.refresh_from_db()
    assert (row.used, row.reserved, row.calls) == (500, 0, 2)
    assert not Reservation.objects.exists()
