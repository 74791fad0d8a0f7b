"""Reserving and settling a model call's tokens on its category's month, and giving back holds no call will settle.

Synchronous Django code; ``ledger.CategoryLedger`` calls it from the event loop. The reservation is
one conditional UPDATE (``used + reserved + n <= budget``), atomic in the database whatever the number
of requests, threads or processes: concurrent calls never overshoot a budget by more than what they
reserved (only a call whose real usage exceeds its reservation can push ``used`` past the budget).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import F, Field, Model
from django.utils import timezone

from assistant.engine.errors import BudgetExceeded
from assistant.runs.commits import lazy_atomic

from .alerts import check_alerts
from .models import BudgetRaise, Category, CategoryMonth, Reservation
from .months import month_of, zone
from .state import CategoryExhausted, CategoryState, month_row, state_from_row

log = logging.getLogger(__name__)

# A hold older than this belongs to a call whose process died (calls are cut long before): it is released.
STALE_AFTER = timedelta(hours=1)


@dataclass(slots=True)
class Place:
    """Where a run's calls are held, read once per run (``CategoryLedger``): the category's month row in the
    organisation's time zone, and the alert thresholds already recorded for that month (none is checked twice).

    Only what does not move while a run runs is kept here; the budget (monthly tokens and raises) is read by the
    reserving statement itself (``_hold``), so a raise or an edit made meanwhile counts at the next call.
    """

    category_id: int
    tz: ZoneInfo
    month: date
    row_id: int
    thresholds: tuple[int, ...] = ()
    """The category's alert thresholds when the run started: which settles need the full check (``settle``)."""
    alerted: set[int] = field(default_factory=set)


def place_of(category_id: int, now: datetime, place: Place | None = None, category: Category | None = None) -> Place:
    """``place`` if it is still the month of ``now``, else the category's month row (created if needed); ``category``:
    the category, with its organisation, when the caller has read it already."""
    if place is not None and place.category_id == category_id and month_of(now, place.tz) == place.month:
        return place
    if category is None or category.pk != category_id or not Category.organisation.is_cached(category):
        category = Category.objects.select_related("organisation").get(pk=category_id)
    tz = zone(category.organisation.time_zone)
    row = month_row(category, month_of(now, tz))
    return Place(category_id, tz, row.month, row.pk, tuple(int(t) for t in category.alert_thresholds or ()))


def _reserve(
    category_id: int,
    tokens: int,
    now: datetime,
    run_id: uuid.UUID | None,
    place: Place | None = None,
    category: Category | None = None,
) -> Reservation | CategoryState:
    """Hold ``tokens`` on the category's month, atomically; the month's state when they do not fit."""
    place = place_of(category_id, now, place, category)
    reservation = _hold(place.row_id, category_id, tokens, now, run_id, place.tz)
    if reservation is not None:
        return reservation
    # It does not fit: holds of dead processes are given back and it is tried again, else the month says why.
    category = Category.objects.select_related("organisation").get(pk=category_id)
    row = CategoryMonth.objects.get(pk=place.row_id)
    if release_stale(row, now):
        reservation = _hold(place.row_id, category_id, tokens, now, run_id, place.tz)
        if reservation is not None:
            return reservation
        row.refresh_from_db()
    state = state_from_row(category, row, now)
    check_alerts(state)
    return state


def hold(category_id: int, tokens: int, now: datetime, run_id: uuid.UUID | None, place: Place) -> Reservation | None:
    """Hold ``tokens`` on the month row ``place`` names if they fit, in the caller's transaction; None (nothing
    written) when they do not: ``reserve`` then says why, or frees stale holds and tries again."""
    return _hold(place.row_id, category_id, tokens, now, run_id, place.tz)


def reserve(
    category_id: int,
    tokens: int,
    now: datetime | None = None,
    run_id: uuid.UUID | None = None,
    place: Place | None = None,
) -> Reservation:
    """Hold ``tokens`` for one model call of run ``run_id``, atomically, or raise ``BudgetExceeded``."""
    held = _reserve(category_id, tokens, now or timezone.now(), run_id, place)
    if isinstance(held, CategoryState):
        raise BudgetExceeded(f"category '{held.category.slug}': {tokens} tokens wanted, {held.remaining} left")
    return held


def reserve_for_run(
    category_id: int,
    run_id: uuid.UUID,
    tokens: int,
    now: datetime | None = None,
    category: Category | None = None,
    place: Place | None = None,
) -> Reservation:
    """Intake: hold a run's first call (``tokens``) before the run starts, or refuse the request
    (``CategoryExhausted``). The run's first model call takes this hold over (``take_over``). ``category``: the
    category (with its organisation) as ``admit`` read it; ``place``: its month row, when the caller read it."""
    now = now or timezone.now()
    held = _reserve(category_id, tokens, now, run_id, place, category=category)
    if isinstance(held, CategoryState):
        raise CategoryExhausted(held, tokens, now)
    return held


def take_over(
    category_id: int, run_id: uuid.UUID, tokens: int, now: datetime | None = None, place: Place | None = None
) -> Reservation | None:
    """The run's first call takes the hold its intake made, resized to ``tokens``; None when there is none left.

    Growing it is one conditional UPDATE, as a reservation is (``BudgetExceeded`` when the difference does not fit:
    the hold is then released); shrinking gives the difference back.
    """
    now = now or timezone.now()
    t = _tables()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, month_id, tokens FROM {t['reservation']} WHERE run_id = %s ORDER BY id LIMIT 1",
            [_db(Reservation, "run", run_id)],
        )
        found = cursor.fetchone()
    if found is None:
        return None
    held = Reservation(pk=found[0], month_id=found[1], tokens=found[2], run_id=run_id)
    extra = tokens - held.tokens
    with lazy_atomic(), connection.cursor() as cursor:
        if extra > 0:
            place = place_of(category_id, now, place)
            grown = _grow(cursor, held.month_id, category_id, extra, now.astimezone(place.tz).date())
        else:
            cursor.execute(f"UPDATE {t['month']} SET reserved = reserved + %s WHERE id = %s", [extra, held.month_id])
            grown = cursor.rowcount == 1
        if grown:
            cursor.execute(f"UPDATE {t['reservation']} SET tokens = %s WHERE id = %s", [tokens, held.pk])
            if cursor.rowcount != 1:
                # Released meanwhile (the run was taken for dead): undo, and let the call reserve afresh.
                cursor.execute(
                    f"UPDATE {t['month']} SET reserved = reserved - %s WHERE id = %s", [extra, held.month_id]
                )
                return None
    if not grown:
        release(held)
        slug = Category.objects.filter(pk=category_id).values_list("slug", flat=True).first()
        raise BudgetExceeded(f"category '{slug}': {extra} more tokens wanted for the first call")
    held.tokens = tokens
    return held


# The statements of every model call, written out: the ORM spent more compiling them than the database running them.
# Plain SQL that SQLite (3.35 or later, for RETURNING) and PostgreSQL both run; values go through the fields'
# own conversions (``_db``).

_BUDGET_SQL = (
    "(SELECT monthly_tokens FROM {category} WHERE id = %s)"
    " + COALESCE((SELECT SUM(tokens) FROM {raise_} WHERE category_id = %s AND ends_on >= %s), 0)"
)


def _tables() -> dict[str, str]:
    quote = connection.ops.quote_name
    return {
        "month": quote(CategoryMonth._meta.db_table),
        "category": quote(Category._meta.db_table),
        "raise_": quote(BudgetRaise._meta.db_table),
        "reservation": quote(Reservation._meta.db_table),
    }


def _db(model: type[Model], name: str, value: object) -> Any:
    """``value`` as the database takes it for the field ``name`` (dates, times, UUIDs differ from one to another)."""
    found = model._meta.get_field(name)
    assert isinstance(found, Field)
    return found.get_db_prep_value(value, connection)


def _grow(cursor: CursorWrapper, row_id: int, category_id: int, tokens: int, today: date) -> bool:
    """Add ``tokens`` to the month's ``reserved`` if they fit in the budget of ``today``: one statement, so that
    the check and the hold cannot be separated by another request's reservation."""
    t = _tables()
    cursor.execute(
        f"UPDATE {t['month']} SET reserved = reserved + %s WHERE id = %s AND used + reserved + %s <= "
        + _BUDGET_SQL.format(**t),
        [tokens, row_id, tokens, category_id, category_id, _db(BudgetRaise, "ends_on", today)],
    )
    return bool(cursor.rowcount == 1)


def month_room(category_id: int, month: date, today: date) -> tuple[int, int | None]:
    """What the category's ``month`` has left (its budget of ``today`` less what is used and reserved), and its row's
    id (None: the month has no row yet), in one read."""
    t = _tables()
    month_value = _db(CategoryMonth, "month", month)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_BUDGET_SQL.format(**t)} - COALESCE("
            f"(SELECT used + reserved FROM {t['month']} WHERE category_id = %s AND month = %s), 0),"
            f" (SELECT id FROM {t['month']} WHERE category_id = %s AND month = %s)",
            [
                category_id,
                category_id,
                _db(BudgetRaise, "ends_on", today),
                category_id,
                month_value,
                category_id,
                month_value,
            ],
        )
        room, row_id = cursor.fetchone()
    return int(room), row_id


def _hold(
    row_id: int, category_id: int, tokens: int, now: datetime, run_id: uuid.UUID | None, tz: ZoneInfo
) -> Reservation | None:
    """One conditional UPDATE holds ``tokens`` if they fit in the budget of ``now``'s day (read by the statement
    itself: the monthly tokens and the raises still running), then the hold's row; None when they do not fit."""
    t = _tables()
    today = now.astimezone(tz).date()
    values = [tokens, _db(Reservation, "created", now), _db(Reservation, "run", run_id)]
    with lazy_atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One statement, one trip: the hold's row is inserted only if the month's UPDATE held the tokens.
            cursor.execute(
                f"WITH grown AS (UPDATE {t['month']} SET reserved = reserved + %s WHERE id = %s AND"
                f" used + reserved + %s <= {_BUDGET_SQL.format(**t)} RETURNING id)"
                f" INSERT INTO {t['reservation']} (month_id, tokens, created, run_id)"
                " SELECT id, %s, %s, %s FROM grown RETURNING id",
                [tokens, row_id, tokens, category_id, category_id, _db(BudgetRaise, "ends_on", today), *values],
            )
            found = cursor.fetchone()
            if found is None:
                return None
            (pk,) = found
        else:
            if not _grow(cursor, row_id, category_id, tokens, today):
                return None
            cursor.execute(
                f"INSERT INTO {t['reservation']} (month_id, tokens, created, run_id) VALUES (%s, %s, %s, %s)"
                " RETURNING id",
                [row_id, *values],
            )
            (pk,) = cursor.fetchone()
    return Reservation(pk=pk, month_id=row_id, tokens=tokens, created=now, run_id=run_id)


def settle(
    reservation: Reservation, spent: int, cost_eur: float, now: datetime | None = None, place: Place | None = None
) -> None:
    """Release the hold and charge what the call really used; then check the category's thresholds.

    With the run's ``place``, the charging statement returns the month's use and budget, and the full check
    (``check_alerts``) runs only when a threshold not yet recorded this month is crossed.
    """
    now = now or timezone.now()
    t = _tables()
    month_id = reservation.month_id
    fast = place is not None and place.row_id == month_id
    with lazy_atomic(), connection.cursor() as cursor:
        # A hold already released as stale is not released twice; what the call used is charged anyway.
        if connection.vendor == "postgresql":
            # One statement, one trip: the hold deleted, its tokens given back if it was still there, the use charged.
            charge = (
                f"WITH released AS (DELETE FROM {t['reservation']} WHERE id = %s RETURNING id)"
                f" UPDATE {t['month']} SET reserved = reserved - CASE WHEN EXISTS (SELECT 1 FROM released)"
                " THEN %s ELSE 0 END, used = used + %s, cost_eur = cost_eur + %s, calls = calls + 1 WHERE id = %s"
            )
            params: list[Any] = [reservation.pk, reservation.tokens, spent, cost_eur, month_id]
        else:
            cursor.execute(f"DELETE FROM {t['reservation']} WHERE id = %s", [reservation.pk])
            released = reservation.tokens if cursor.rowcount else 0
            charge = (
                f"UPDATE {t['month']} SET reserved = reserved - %s, used = used + %s, cost_eur = cost_eur + %s,"
                " calls = calls + 1 WHERE id = %s"
            )
            params = [released, spent, cost_eur, month_id]
        if place is not None and fast:
            charge += " RETURNING used, " + _BUDGET_SQL.format(**t)
            params += [
                place.category_id,
                place.category_id,
                _db(BudgetRaise, "ends_on", now.astimezone(place.tz).date()),
            ]
        cursor.execute(charge, params)
        returned = cursor.fetchone() if fast else None
    if place is None or returned is None:
        row = CategoryMonth.objects.select_related("category__organisation").get(pk=month_id)
        check_alerts(state_from_row(row.category, row, now))
        return
    used, budget = int(returned[0]), int(returned[1])  # PostgreSQL's SUM of a bigint is a numeric
    percent = 100.0 * used / budget if budget else 100.0
    due = {t for t in place.thresholds if t <= percent}
    if due - place.alerted:
        row = CategoryMonth.objects.select_related("category__organisation").get(pk=month_id)
        check_alerts(state_from_row(row.category, row, now))
        place.alerted |= due  # recorded now, by this call or an earlier one


def release(reservation: Reservation) -> int:
    """Give back a hold whose call was not served (nothing charged, no call counted); returns the tokens released."""
    with lazy_atomic():
        if not Reservation.objects.filter(pk=reservation.pk).delete()[0]:
            return 0  # already released (stale, or its run's reservations released by the reaper)
        CategoryMonth.objects.filter(pk=reservation.month_id).update(reserved=F("reserved") - reservation.tokens)
    return reservation.tokens


def release_run(run_id: uuid.UUID) -> int:
    """Give back every hold of a run that no process executes any more (failed by the reaper, ``recover_runs``) or
    that ended: its calls will never settle them. Returns the tokens released.

    One statement when it holds nothing (a run's end, usually): the holds are deleted and returned together, each
    given back to its month only by the process that deleted it."""
    t = _tables()
    with lazy_atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {t['reservation']} WHERE run_id = %s RETURNING month_id, tokens",
            [_db(Reservation, "run", run_id)],
        )
        released = cursor.fetchall()
        for month_id, tokens in released:
            cursor.execute(f"UPDATE {t['month']} SET reserved = reserved - %s WHERE id = %s", [tokens, month_id])
    return sum(tokens for _month, tokens in released)


def release_stale(row: CategoryMonth, now: datetime) -> int:
    """Release the holds of the month older than ``STALE_AFTER``; returns the tokens given back."""
    released = 0
    for stale in Reservation.objects.filter(month=row, created__lt=now - STALE_AFTER):
        with transaction.atomic():
            if Reservation.objects.filter(pk=stale.pk).delete()[0]:  # only one process releases it
                CategoryMonth.objects.filter(pk=row.pk).update(reserved=F("reserved") - stale.tokens)
                released += stale.tokens
    if released:
        log.warning("released %s tokens held by calls that never settled on %s", released, row)
    return released
