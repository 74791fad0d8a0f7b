"""Whose month a run counts against under a spend limit (``SpendPlace``), and that month's ``SpendMonth`` row,
created at the first run under a limit in the month from the cost of that month's finished runs so far."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from assistant.orgs.models import ApiKey, Organisation
from assistant.orgs.spending import SpendLimit, limit_for
from assistant.runs.models import Run

from .models import SpendMonth
from .months import month_bounds, month_of, zone


@dataclass(slots=True)
class SpendPlace:
    """Whose month a run counts against, and its limit, read once when the run starts."""

    organisation_id: int
    user_id: int | None
    """The member (None for an API key)."""
    api_key_id: int | None
    limit: SpendLimit
    tz: ZoneInfo
    month: date
    row_id: int
    alerted: set[int] = field(default_factory=set)
    """Thresholds this run has seen recorded (none is checked twice)."""


def owner_filter(user_id: int | None, api_key_id: int | None) -> dict[str, Any]:
    """The filter of a member's rows (their own, not their keys') or of a key's."""
    return {"api_key_id": api_key_id} if api_key_id is not None else {"user_id": user_id, "api_key__isnull": True}


def month_spent(organisation_id: int, user_id: int | None, api_key_id: int | None, month: date, tz: ZoneInfo) -> float:
    """What the month's finished runs of a member (chat and scheduled tasks) or of a key cost."""
    start, end = month_bounds(month, tz)
    runs = Run.objects.filter(organisation_id=organisation_id, created__gte=start, created__lt=end)
    runs = runs.exclude(status=Run.Status.RUNNING).filter(**owner_filter(user_id, api_key_id))
    return float(runs.aggregate(total=Sum("cost_eur"))["total"] or 0.0)


def spend_row(
    organisation_id: int, user_id: int | None, api_key_id: int | None, month: date, tz: ZoneInfo
) -> SpendMonth:
    """The month's row of a member or a key, created (from the cost of the month's finished runs) when missing."""
    whose = owner_filter(user_id, api_key_id)
    row = SpendMonth.objects.filter(organisation_id=organisation_id, month=month, **whose).first()
    if row is not None:
        return row
    spent = month_spent(organisation_id, user_id, api_key_id, month, tz)
    try:
        with transaction.atomic():
            return SpendMonth.objects.create(
                organisation_id=organisation_id,
                user_id=None if api_key_id is not None else user_id,
                api_key_id=api_key_id,
                month=month,
                used_eur=spent,
            )
    except IntegrityError:  # another request created it first
        return SpendMonth.objects.get(organisation_id=organisation_id, month=month, **whose)


def place_for(
    org: Organisation, user_id: int | None, api_key: ApiKey | None, now: datetime | None = None
) -> SpendPlace | None:
    """The month a run of ``user_id`` (through ``api_key``) counts against, when a limit applies; else None."""
    limit = limit_for(org, user_id, api_key)
    if limit is None:
        return None
    now = now or timezone.now()
    tz = zone(org.time_zone)
    month = month_of(now, tz)
    key_id = api_key.pk if api_key is not None else None
    user = None if key_id is not None else user_id
    row = spend_row(org.pk, user, key_id, month, tz)
    return SpendPlace(org.pk, user, key_id, limit, tz, month, row.pk)
