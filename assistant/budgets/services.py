"""Classifying a request, a category's month, reserving and settling tokens, raises and alerts.

Synchronous Django code; ``ledger.CategoryLedger`` calls it from the event loop. The reservation is
one conditional UPDATE (``used + reserved + n <= budget``), atomic in the database whatever the number
of requests, threads or processes: concurrent calls never overshoot a budget by more than what they
reserved (only a call whose real usage exceeds its reservation can push ``used`` past the budget).
"""

from __future__ import annotations

import logging
import math
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.db import IntegrityError, connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import F, Field, Model, QuerySet, Sum
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from assistant.catalogue import snapshot
from assistant.engine.errors import BudgetExceeded, RequestRefused
from assistant.engine.refusals import Refusal
from assistant.engine.tokens import estimate_tokens
from assistant.orgs import audit
from assistant.orgs.models import Organisation
from assistant.orgs.services import admin_emails, is_admin
from assistant.runs.commits import lazy_atomic

from .models import BudgetAlert, BudgetRaise, Category, CategoryMonth, Reservation
from .months import month_bounds, month_of, zone

log = logging.getLogger(__name__)

# A hold older than this belongs to a call whose process died (calls are cut long before): it is released.
STALE_AFTER = timedelta(hours=1)


# A request refused because running requests hold the rest of the category: the client may try again this soon.
RESERVED_RETRY_SECONDS = 5


class CategoryExhausted(RequestRefused):
    """The request's category cannot take it now; the message names the category, its real share and when to retry.

    ``spent``: even with nothing reserved the request would not fit this month (retry after ``state.resets_at``);
    otherwise running requests hold the rest, and it may fit in a few seconds (``retry_after``).
    """

    code = "category_budget_exhausted"

    def __init__(self, state: CategoryState, tokens: int, now: datetime | None = None) -> None:
        spent = state.used + tokens > state.budget
        until_reset = int((state.resets_at - (now or timezone.now())).total_seconds())
        retry_after = max(1, until_reset) if spent else RESERVED_RETRY_SECONDS
        super().__init__(
            Refusal(
                code="category_spent" if spent else "category_busy",
                category=state.category.slug,
                name=state.category.name,
                used=state.used,
                limit=state.budget,
                reserved=state.reserved,
                tokens=tokens,
                percent=state.shown_percent,
                resets_at=state.resets_at,
                zone=zone(state.category.organisation.time_zone).key,
                retry_after=retry_after,
            )
        )
        self.state = state
        self.tokens = tokens
        self.spent = spent
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class CategoryState:
    """A category's month as it stands: its budget (raises included), used, reserved, cost."""

    category: Category
    month: date
    base: int
    raised: int
    used: int
    reserved: int
    cost_eur: float
    calls: int
    resets_at: datetime

    @property
    def budget(self) -> int:
        return self.base + self.raised

    @property
    def remaining(self) -> int:
        return max(0, self.budget - self.used - self.reserved)

    @property
    def warn_at(self) -> int:
        """Tokens at the category's first alert threshold (where its gauge turns amber)."""
        return self.budget * int(min(self.category.alert_thresholds or [100])) // 100

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.budget if self.budget else 100.0

    @property
    def shown_percent(self) -> int:
        """The share used, rounded down: 99.6 % used is not "100 %"."""
        return math.floor(self.percent)


def categories_of(org: Organisation) -> list[Category]:
    """The organisation's categories, each knowing its organisation (no query for its time zone)."""
    return list(org.categories.all())


def classify(org: Organisation, slug: str = "") -> Category | None:
    """The category a request is charged to: the one it names, else the default; None if the organisation has none."""
    categories = categories_of(org)
    if not categories:
        if slug:
            raise RequestRefused(Refusal(code="no_categories", category=slug))
        return None
    if slug:
        for category in categories:
            if category.slug == slug:
                return category
        raise RequestRefused(Refusal(code="unknown_category", category=slug, allowed=tuple(c.slug for c in categories)))
    return next((c for c in categories if c.is_default), categories[0])


def raised_tokens(category: Category, today: date) -> int:
    """Tokens added by the category's raises still running on ``today`` (their end date included)."""
    return int(category.raises.filter(ends_on__gte=today).aggregate(total=Sum("tokens"))["total"] or 0)


def month_row(category: Category, month: date) -> CategoryMonth:
    row, _created = CategoryMonth.objects.get_or_create(category=category, month=month)
    return row


def _state(category: Category, row: CategoryMonth, now: datetime) -> CategoryState:
    tz = zone(category.organisation.time_zone)
    return CategoryState(
        category=category,
        month=row.month,
        base=category.monthly_tokens,
        raised=raised_tokens(category, now.astimezone(tz).date()),
        used=row.used,
        reserved=row.reserved,
        cost_eur=row.cost_eur,
        calls=row.calls,
        resets_at=month_bounds(row.month, tz)[1],
    )


def state_of(category: Category, now: datetime | None = None, month: date | None = None) -> CategoryState:
    """The category's current month (or ``month``); a month with no call yet has no row and reads as zero."""
    now = now or timezone.now()
    month = month or month_of(now, zone(category.organisation.time_zone))
    row = CategoryMonth.objects.filter(category=category, month=month).first()
    return _state(category, row or CategoryMonth(category=category, month=month), now)


def ensure_room(category: Category, tokens: int, now: datetime | None = None) -> Place | None:
    """Refuse a request, before any model call, when its category cannot take its first call; else the category's
    month row (``Place``), when it has one already.

    One statement says whether it fits and which row is the month's (``_room``); only a request that does not reads
    the month's full state.
    """
    now = now or timezone.now()
    tz = zone(category.organisation.time_zone)
    month = month_of(now, tz)
    room, row_id = _room(category.pk, month, now.astimezone(tz).date())
    if room >= tokens:
        thresholds = tuple(int(t) for t in category.alert_thresholds or ())
        return None if row_id is None else Place(category.pk, tz, month, row_id, thresholds)
    state = state_of(category, now)
    if state.remaining < tokens:
        check_alerts(state)
        raise CategoryExhausted(state, tokens, now)
    return None


def admit(org: Organisation, slug: str, text: str, model: str, now: datetime | None = None) -> Category | None:
    """Classify a request and refuse it, before anything is saved, if its category cannot take its first call.

    The first call needs at least the message and the main model's output cap; intake then reserves what it
    really needs (``reserve_for_run``).
    """
    admitted = admit_at(org, slug, text, model, now)
    return None if admitted is None else admitted[0]


def admit_at(
    org: Organisation, slug: str, text: str, model: str, now: datetime | None = None
) -> tuple[Category, Place | None] | None:
    """``admit``, with the category's month row as its check read it (None when the month has none yet), for the
    reservation that follows (``reserve_for_run``'s ``place``)."""
    category = classify(org, slug)
    if category is None:
        return None
    catalogue = snapshot.catalogue()
    cap = catalogue[model].output_cap if model in catalogue else 0
    return category, ensure_room(category, estimate_tokens(text) + cap, now)


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
    state = _state(category, row, now)
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


def _room(category_id: int, month: date, today: date) -> tuple[int, int | None]:
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
        check_alerts(_state(row.category, row, now))
        return
    used, budget = int(returned[0]), int(returned[1])  # PostgreSQL's SUM of a bigint is a numeric
    percent = 100.0 * used / budget if budget else 100.0
    due = {t for t in place.thresholds if t <= percent}
    if due - place.alerted:
        row = CategoryMonth.objects.select_related("category__organisation").get(pk=month_id)
        check_alerts(_state(row.category, row, now))
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


def raise_budget(
    category: Category, user: User | AnonymousUser, tokens: int, reason: str, ends_on: date
) -> BudgetRaise:
    """Add ``tokens`` to one category until ``ends_on``: only an admin of its organisation may."""
    if not user.is_authenticated or not is_admin(user, category.organisation):
        raise PermissionDenied("Only an admin of the organisation can raise a category's budget.")
    if tokens < 1 or not reason.strip():
        raise ValueError("A raise needs a positive number of tokens and a reason.")
    raised = BudgetRaise.objects.create(
        category=category,
        tokens=tokens,
        reason=reason.strip(),
        ends_on=ends_on,
        created_by=user,
        created_by_name=user.get_username(),
    )
    audit.record(
        user, category.organisation, "budget.raised", category.name, tokens=tokens, until=ends_on, reason=raised.reason
    )
    return raised


# Alerts -------------------------------------------------------------------------------------------


def check_alerts(state: CategoryState) -> list[BudgetAlert]:
    """Record (and email) each threshold the category crossed this month, once, at its true share: what it used
    (a request refused while running requests hold the rest does not make it 100 %)."""
    category = state.category
    level = state.percent
    due = sorted(t for t in category.alert_thresholds if t <= level)
    if not due:
        return []
    known = set(BudgetAlert.objects.filter(category=category, month=state.month).values_list("threshold", flat=True))
    alerts = []
    for threshold in due:
        if threshold in known:
            continue
        try:
            with transaction.atomic():
                alerts.append(
                    BudgetAlert.objects.create(
                        category=category, month=state.month, threshold=threshold, used=state.used, budget=state.budget
                    )
                )
        except IntegrityError:
            pass  # another request recorded this threshold first: it is sent once
    if alerts:
        _email(state, alerts)
    return alerts


def _email(state: CategoryState, alerts: list[BudgetAlert]) -> None:
    org = state.category.organisation
    recipients = admin_emails(org)
    if not recipients:
        return
    threshold = max(a.threshold for a in alerts)
    tz = zone(org.time_zone)
    # The site's language: the email answers no one's request, so not the language of whoever crossed the line.
    with translation.override(settings.LANGUAGE_CODE):
        subject = _("%(org)s: the category “%(name)s” is at %(threshold)s %% of its monthly budget") % {
            "org": org.name,
            "name": state.category.name,
            "threshold": threshold,
        }
        body = _(
            "The category “%(name)s” of %(org)s has used %(used)s of its %(budget)s tokens this month "
            "(%(percent)s %%), for %(cost)s EUR.\n"
            "At 100 %% its requests are refused until the budget resets, on %(date)s at midnight (%(zone)s); "
            "no other category's budget is used for it. An admin can raise it temporarily on the budgets page.\n"
        ) % {
            "name": state.category.name,
            "org": org.name,
            "used": f"{state.used:,}",
            "budget": f"{state.budget:,}",
            "percent": state.shown_percent,
            "cost": f"{state.cost_eur:.2f}",
            "date": state.resets_at.astimezone(tz).date().isoformat(),
            "zone": tz.key,
        }
    try:
        send_mail(subject, body, None, recipients)
    except Exception:
        # A mail server that is down must not fail the run that crossed the threshold.
        log.exception("could not email the budget alert of category %s", state.category.pk)
        return
    BudgetAlert.objects.filter(pk__in=[a.pk for a in alerts]).update(emailed_to=recipients)


def open_alerts(org: Organisation) -> QuerySet[BudgetAlert]:
    """Alerts no admin has marked as seen yet."""
    return BudgetAlert.objects.filter(category__organisation=org, seen__isnull=True).select_related("category")
