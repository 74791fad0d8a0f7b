"""Months in an organisation's time zone: which month an instant falls in, and where a month starts and ends.

A month is named by its first day (a ``date``); its bounds are aware datetimes at midnight on the 1st
in the organisation's zone, so the monthly reset follows that zone, daylight saving included.
"""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo


def zone(name: str) -> ZoneInfo:
    return ZoneInfo(name or "UTC")


def month_of(when: datetime, tz: ZoneInfo) -> date:
    """The month (its first day) that the instant ``when`` falls in, in ``tz``."""
    local = when.astimezone(tz)
    return date(local.year, local.month, 1)


def next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def previous_month(month: date) -> date:
    return date(month.year - (month.month == 1), (month.month - 2) % 12 + 1, 1)


def month_start(month: date, tz: ZoneInfo) -> datetime:
    """Midnight on the 1st of ``month`` in ``tz``."""
    return datetime(month.year, month.month, 1, tzinfo=tz)


def month_bounds(month: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """The month from its first instant (included) to the next month's first instant (excluded)."""
    return month_start(month, tz), month_start(next_month(month), tz)


# The months a page may ask for: the usage page reaches three months back and one forward, and aware
# datetimes near year 1 or 9999 overflow in another time zone.
FIRST_YEAR, LAST_YEAR = 1900, 9000


def parse_month(value: str | None) -> date | None:
    """``2026-03`` → 1 March 2026; anything else (a year outside 1900-9000 included) → None."""
    try:
        year, month = (int(part) for part in (value or "").split("-"))
        if not FIRST_YEAR <= year <= LAST_YEAR:
            return None
        return date(year, month, 1)
    except ValueError:
        return None
