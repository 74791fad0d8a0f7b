"""A member's or a key's month against its spend limit as the pages read it, and the chat's banner at 80 % and
100 %."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime

from django.utils import formats, timezone
from django.utils.translation import gettext as _

from assistant.orgs.dates import long_date
from assistant.orgs.models import ApiKey, Organisation
from assistant.orgs.spending import SpendLimit, limit_for

from .models import SpendMonth
from .months import month_bounds, month_of, next_month, zone
from .spend_alerts import THRESHOLDS
from .spend_months import month_spent, owner_filter


@dataclass(frozen=True, slots=True)
class SpendState:
    """A member's or a key's month against its limit, as the pages show it."""

    limit: SpendLimit | None
    used_eur: float
    reserved_eur: float
    month: date
    resets_at: datetime

    @property
    def percent(self) -> int:
        if self.limit is None or not self.limit.eur:
            return 0
        return math.floor(100.0 * self.used_eur / self.limit.eur)

    @property
    def threshold(self) -> int | None:
        """The highest alert threshold reached (80 or 100), for the banner; None below 80 % or with no limit."""
        reached = [t for t in THRESHOLDS if self.limit is not None and self.percent >= t]
        return max(reached) if reached else None


def state_for(
    org: Organisation, user_id: int | None, api_key: ApiKey | None = None, now: datetime | None = None
) -> SpendState:
    """The month of a member (their chat runs and scheduled tasks) or of a key: its limit, what it spent and holds
    (nothing when no limit applies: only a limited month is counted apart)."""
    now = now or timezone.now()
    tz = zone(org.time_zone)
    month = month_of(now, tz)
    key_id = api_key.pk if api_key is not None else None
    user = None if key_id is not None else user_id
    limit = limit_for(org, user_id, api_key)
    resets_at = month_bounds(month, tz)[1]
    if limit is None:
        return SpendState(None, 0.0, 0.0, month, resets_at)  # nothing counted apart: the runs are the record
    row = SpendMonth.objects.filter(organisation=org, month=month, **owner_filter(user, key_id)).first()
    if row is None:
        return SpendState(limit, month_spent(org.pk, user, key_id, month, tz), 0.0, month, resets_at)
    return SpendState(limit, row.used_eur, row.reserved_eur, month, resets_at)


def banner_text(state: SpendState) -> str:
    """The chat's banner for a member at 80 % or 100 % of their limit, in the reader's language; "" below."""
    if state.threshold is None or state.limit is None:
        return ""
    figures = {
        "used": formats.number_format(state.used_eur, 2),
        "limit": formats.number_format(state.limit.eur, 2),
        "percent": state.percent,
        "date": long_date(next_month(state.month)),
    }
    if not state.limit.hard:
        return (
            _(
                "You have spent %(used)s EUR of your monthly spend limit of %(limit)s EUR (%(percent)s %%). It is an "
                "alert: your requests still go through, and your admins are told."
            )
            % figures
        )
    if state.threshold >= 100:
        return (
            _(
                "You have spent %(used)s EUR of your monthly spend limit of %(limit)s EUR (%(percent)s %%): your "
                "requests are refused until it resets on %(date)s."
            )
            % figures
        )
    return (
        _(
            "You have spent %(used)s EUR of your monthly spend limit of %(limit)s EUR (%(percent)s %%). At 100 %% "
            "your requests are refused until it resets on %(date)s."
        )
        % figures
    )
