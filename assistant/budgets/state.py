"""A category's month as it stands (its budget with raises, used, reserved, cost), and the refusal that quotes it.

Synchronous Django code. The month's row (``CategoryMonth``) is written by the reservations (``reservations``);
this module reads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime

from django.db.models import Sum
from django.utils import timezone

from assistant.engine.errors import RequestRefused
from assistant.engine.refusals import Refusal

from .models import Category, CategoryMonth
from .months import month_bounds, month_of, zone

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


def raised_tokens(category: Category, today: date) -> int:
    """Tokens added by the category's raises still running on ``today`` (their end date included)."""
    return int(category.raises.filter(ends_on__gte=today).aggregate(total=Sum("tokens"))["total"] or 0)


def month_row(category: Category, month: date) -> CategoryMonth:
    row, _created = CategoryMonth.objects.get_or_create(category=category, month=month)
    return row


def state_from_row(category: Category, row: CategoryMonth, now: datetime) -> CategoryState:
    """The category's month as ``row`` records it, its budget as of ``now`` (raises still running)."""
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
    return state_from_row(category, row or CategoryMonth(category=category, month=month), now)
