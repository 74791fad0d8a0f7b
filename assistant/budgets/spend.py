"""Spend limits: a member's or an API key's month in EUR, beside the category budgets (a request must fit both).

Which limit applies is the organisation's setting (``orgs.spending``): an API request counts against its key's limit
only, a member's chat runs and scheduled tasks against theirs (their own, else the organisation's default). While one
applies, the month is counted on a ``SpendMonth`` row (created at the first run under a limit in the month, from the
cost of that month's finished runs so far).

A hard cap is held as a category budget is: before each model call, the most the call can cost (``call_eur``: its
input at the input price and up to its output cap at the output price) is reserved in one conditional ``UPDATE``
(``used_eur + reserved_eur + x <= limit``), then settled to what the call cost; so concurrent requests never
overshoot a hard cap by more than what is reserved before each call. The first call is held at intake, in the
transaction that saves the run: a request the cap cannot take is refused there, before anything is saved
(``SpendExhausted``, API code ``spend_limit_exhausted``); a run whose next call does not fit stops as Stop does
(``SpendLimitReached``, cause ``spend_limit``). An alert limit holds nothing: its month is counted, and the admins
and the member are e-mailed at 80 % and 100 % (``SpendAlert``, once each per month), and the chat shows a banner.

A limit is read when a run starts: an admin's change counts from the next run.

Here: the most a call can cost, admission and the holds, the run's ledger. Whose month and its row:
``spend_months``; the alerts: ``spend_alerts``; what the pages read: ``spend_state``.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable
from datetime import datetime

from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from assistant.catalogue import snapshot
from assistant.engine.errors import RequestRefused, SpendLimitReached
from assistant.engine.refusals import Refusal
from assistant.engine.types import UsagePart
from assistant.orgs.models import ApiKey, Organisation
from assistant.runs.commits import lazy_atomic

from .models import SpendMonth, SpendReservation
from .months import month_bounds
from .reservations import STALE_AFTER, _db
from .spend_alerts import check_alerts
from .spend_months import SpendPlace, place_for
from .state import RESERVED_RETRY_SECONDS

log = logging.getLogger(__name__)


def call_eur(model: str, tokens: int) -> float:
    """The most a call reserving ``tokens`` (its input and its output cap) of ``model`` can cost: up to the model's
    output cap of them at the output price, the rest at the input price (the dearer of the two when output is cheaper)."""
    info = snapshot.catalogue().get(model)
    if info is None:
        return 0.0
    if info.output_price >= info.input_price:
        out = min(tokens, info.output_cap)
        return (out * info.output_price + (tokens - out) * info.input_price) / 1_000_000
    return tokens * info.input_price / 1_000_000


class SpendExhausted(RequestRefused):
    """A hard cap cannot take the request's first call; the refusal says whose limit, what was spent and when to retry.

    ``spent``: even with nothing reserved the call would not fit this month (retry after the month's end); otherwise
    running requests hold the rest (retry in a few seconds)."""

    code = "spend_limit_exhausted"

    def __init__(self, place: SpendPlace, row: SpendMonth, cost_eur: float, now: datetime) -> None:
        limit = place.limit.eur
        spent = row.used_eur + cost_eur > limit
        resets_at = month_bounds(place.month, place.tz)[1]
        retry_after = max(1, int((resets_at - now).total_seconds())) if spent else RESERVED_RETRY_SECONDS
        super().__init__(
            Refusal(
                code="spend_limit_spent" if spent else "spend_limit_busy",
                limit_kind=place.limit.kind,
                used_eur=round(row.used_eur, 4),
                limit_eur=limit,
                reserved_eur=round(row.reserved_eur, 4),
                cost_eur=round(cost_eur, 6),
                percent=math.floor(100.0 * row.used_eur / limit) if limit else 100,
                resets_at=resets_at,
                zone=place.tz.key,
                retry_after=retry_after,
            )
        )
        self.spent = spent
        self.retry_after = retry_after


# Admission and the holds ------------------------------------------------------------------------------------------


def admit(
    org: Organisation, user_id: int | None, api_key: ApiKey | None, model: str, tokens: int, now: datetime | None = None
) -> SpendPlace | None:
    """Refuse a request, before anything is saved, when a hard cap cannot take its first call (``tokens``); else the
    month it counts against (None: no limit applies)."""
    now = now or timezone.now()
    place = place_for(org, user_id, api_key, now)
    if place is None or not place.limit.hard:
        return place
    row = SpendMonth.objects.get(pk=place.row_id)
    cost = call_eur(model, tokens)
    if row.used_eur + row.reserved_eur + cost > place.limit.eur:
        if release_stale(row, now):
            row.refresh_from_db()
        if row.used_eur + row.reserved_eur + cost > place.limit.eur:
            check_alerts(place, row.used_eur)
            raise SpendExhausted(place, row, cost, now)
    return place


def _tables() -> dict[str, str]:
    quote = connection.ops.quote_name
    return {"month": quote(SpendMonth._meta.db_table), "reservation": quote(SpendReservation._meta.db_table)}


def _hold(place: SpendPlace, eur: float, now: datetime, run_id: uuid.UUID | None) -> SpendReservation | None:
    """One conditional UPDATE holds ``eur`` if it fits under the limit, then the hold's row; None when it does not."""
    t = _tables()
    values = [eur, _db(SpendReservation, "created", now), _db(SpendReservation, "run", run_id)]
    grow = (
        f"UPDATE {t['month']} SET reserved_eur = reserved_eur + %s WHERE id = %s AND used_eur + reserved_eur + %s <= %s"
    )
    with lazy_atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"WITH grown AS ({grow} RETURNING id) INSERT INTO {t['reservation']} (month_id, eur, created, run_id)"
                " SELECT id, %s, %s, %s FROM grown RETURNING id",
                [eur, place.row_id, eur, place.limit.eur, *values],
            )
            found = cursor.fetchone()
            if found is None:
                return None
            (pk,) = found
        else:
            cursor.execute(grow, [eur, place.row_id, eur, place.limit.eur])
            if cursor.rowcount != 1:
                return None
            cursor.execute(
                f"INSERT INTO {t['reservation']} (month_id, eur, created, run_id) VALUES (%s, %s, %s, %s) RETURNING id",
                [place.row_id, *values],
            )
            (pk,) = cursor.fetchone()
    return SpendReservation(pk=pk, month_id=place.row_id, eur=eur, created=now, run_id=run_id)


def _full(place: SpendPlace, eur: float, now: datetime, run_id: uuid.UUID | None) -> SpendReservation | SpendMonth:
    """Hold ``eur``, or, when it does not fit even after holds of dead processes are given back, the month's row."""
    held = _hold(place, eur, now, run_id)
    if held is not None:
        return held
    row = SpendMonth.objects.get(pk=place.row_id)
    if release_stale(row, now):
        held = _hold(place, eur, now, run_id)
        if held is not None:
            return held
        row.refresh_from_db()
    return row


def reserve_for_run(place: SpendPlace, run_id: uuid.UUID, model: str, tokens: int, now: datetime) -> None:
    """Intake: hold a run's first call under a hard cap, in intake's transaction, or refuse it (``SpendExhausted``)."""
    if not place.limit.hard:
        return
    cost = call_eur(model, tokens)
    held = _full(place, cost, now, run_id)
    if isinstance(held, SpendMonth):
        raise SpendExhausted(place, held, cost, now)


def reserve(place: SpendPlace, model: str, tokens: int, now: datetime, run_id: uuid.UUID | None) -> SpendReservation:
    """Hold one call's most cost under the hard cap, or raise ``SpendLimitReached``."""
    held = _full(place, call_eur(model, tokens), now, run_id)
    if isinstance(held, SpendMonth):
        raise SpendLimitReached(
            f"{place.limit.kind} spend limit: {held.used_eur:.4f} of {place.limit.eur:.2f} EUR spent",
            held.used_eur,
            place.limit.eur,
        )
    return held


def take_over(place: SpendPlace, run_id: uuid.UUID, model: str, tokens: int, now: datetime) -> SpendReservation | None:
    """The run's first call takes the hold its intake made, resized to the call; None when there is none left. Growing
    it is one conditional UPDATE (``SpendLimitReached`` when the difference does not fit: the hold is released)."""
    found = SpendReservation.objects.filter(run_id=run_id, month_id=place.row_id).order_by("pk").first()
    if found is None:
        return None
    eur = call_eur(model, tokens)
    extra = eur - found.eur
    t = _tables()
    with lazy_atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {t['month']} SET reserved_eur = reserved_eur + %s WHERE id = %s"
            + (" AND used_eur + reserved_eur + %s <= %s" if extra > 0 else ""),
            [extra, place.row_id, *([extra, place.limit.eur] if extra > 0 else [])],
        )
        grown = cursor.rowcount == 1
        if grown:
            cursor.execute(f"UPDATE {t['reservation']} SET eur = %s WHERE id = %s", [eur, found.pk])
            if cursor.rowcount != 1:  # released meanwhile (the run was taken for dead): undo, reserve afresh
                cursor.execute(
                    f"UPDATE {t['month']} SET reserved_eur = reserved_eur - %s WHERE id = %s", [extra, place.row_id]
                )
                return None
    if not grown:
        release(found)
        row = SpendMonth.objects.get(pk=place.row_id)
        raise SpendLimitReached(
            f"{place.limit.kind} spend limit: {row.used_eur:.4f} of {place.limit.eur:.2f} EUR spent",
            row.used_eur,
            place.limit.eur,
        )
    found.eur = eur
    return found


def settle(place: SpendPlace, reservation: SpendReservation | None, cost_eur: float, now: datetime) -> None:
    """Release the call's hold (if it still stands) and charge what the call cost; then check the thresholds."""
    t = _tables()
    with lazy_atomic(), connection.cursor() as cursor:
        released = 0.0
        if reservation is not None:
            cursor.execute(f"DELETE FROM {t['reservation']} WHERE id = %s", [reservation.pk])
            released = reservation.eur if cursor.rowcount else 0.0
        cursor.execute(
            f"UPDATE {t['month']} SET reserved_eur = reserved_eur - %s, used_eur = used_eur + %s, calls = calls + 1"
            " WHERE id = %s RETURNING used_eur",
            [released, cost_eur, place.row_id],
        )
        (used,) = cursor.fetchone()
    check_alerts(place, float(used))


def release(reservation: SpendReservation) -> float:
    """Give back a hold whose call was not served; returns the EUR released."""
    with lazy_atomic():
        if not SpendReservation.objects.filter(pk=reservation.pk).delete()[0]:
            return 0.0
        SpendMonth.objects.filter(pk=reservation.month_id).update(reserved_eur=F("reserved_eur") - reservation.eur)
    return reservation.eur


def release_run(run_id: uuid.UUID) -> float:
    """Give back every spend hold of a run that ended or that no process executes any more."""
    t = _tables()
    with lazy_atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {t['reservation']} WHERE run_id = %s RETURNING month_id, eur",
            [_db(SpendReservation, "run", run_id)],
        )
        released = cursor.fetchall()
        for month_id, eur in released:
            cursor.execute(f"UPDATE {t['month']} SET reserved_eur = reserved_eur - %s WHERE id = %s", [eur, month_id])
    return float(sum(eur for _month, eur in released))


def release_stale(row: SpendMonth, now: datetime) -> float:
    """Release the month's holds older than ``STALE_AFTER`` (their process died); returns the EUR given back."""
    released = 0.0
    for stale in SpendReservation.objects.filter(month=row, created__lt=now - STALE_AFTER):
        with transaction.atomic():
            if SpendReservation.objects.filter(pk=stale.pk).delete()[0]:
                SpendMonth.objects.filter(pk=row.pk).update(reserved_eur=F("reserved_eur") - stale.eur)
                released += stale.eur
    if released:
        log.warning("released %.4f EUR held by calls that never settled on %s", released, row)
    return released


# The run's ledger -------------------------------------------------------------------------------------------------

_Settlement = tuple[SpendReservation | None, float, datetime]


class SpendLedger:
    """Charges one run's calls to its member's or key's month (``reserve`` raises ``SpendLimitReached`` when a hard
    cap cannot take the call). Settlements are written with the run's next reservation, or with its end
    (``take_unsettled``); meanwhile the call's hold stands, so the month never counts a call at less than it used."""

    def __init__(
        self, place: SpendPlace, run_id: uuid.UUID | None = None, clock: Callable[[], datetime] = timezone.now
    ) -> None:
        self.place = place
        self.run_id = run_id
        self.clock = clock
        self._first = run_id is not None and place.limit.hard
        self._unsettled: list[_Settlement] = []

    def _reserve(self, model: str, tokens: int, now: datetime, unsettled: list[_Settlement]) -> SpendReservation | None:
        if unsettled:
            self._settle(unsettled)
        if not self.place.limit.hard:
            return None
        if self._first:
            self._first = False
            assert self.run_id is not None
            held = take_over(self.place, self.run_id, model, tokens, now)
            if held is not None:
                return held
        return reserve(self.place, model, tokens, now, self.run_id)

    def _settle(self, unsettled: list[_Settlement]) -> None:
        with lazy_atomic():
            for reservation, cost, now in unsettled:
                settle(self.place, reservation, cost, now)

    def _take(self) -> list[_Settlement]:
        unsettled, self._unsettled = self._unsettled, []
        return unsettled

    async def reserve(self, model: str, tokens: int) -> object:
        return await sync_to_async(self._reserve)(model, tokens, self.clock(), self._take())

    async def settle(self, reservation: object, model: str, usage: UsagePart | None, cost_eur: float) -> None:
        assert reservation is None or isinstance(reservation, SpendReservation)
        if usage is None:  # not served: nothing charged
            if reservation is not None:
                await sync_to_async(release)(reservation)
            return
        self._unsettled.append((reservation, cost_eur, self.clock()))

    def take_unsettled(self) -> Callable[[], None] | None:
        unsettled = self._take()
        return (lambda: self._settle(unsettled)) if unsettled else None

    async def drain(self) -> None:
        unsettled = self._take()
        if unsettled:
            await sync_to_async(self._settle)(unsettled)
