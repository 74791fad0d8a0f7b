"""The monthly reset follows the organisation's time zone; raises end at midnight after their end date there."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from assistant.budgets import reservations, services, state
from assistant.budgets.charts import nice_ceiling
from assistant.budgets.models import BudgetRaise, CategoryMonth
from assistant.budgets.months import month_bounds, month_of, next_month, parse_month, previous_month
from assistant.engine.errors import BudgetExceeded
from tests.budgets.budgets_support import World, use

NEW_YORK = ZoneInfo("America/New_York")
# 23:30 on 31 January in New York is already 1 February in UTC (and in Paris).
LAST_EVENING = datetime(2026, 1, 31, 23, 30, tzinfo=NEW_YORK)
NEXT_MORNING = datetime(2026, 2, 1, 0, 30, tzinfo=NEW_YORK)


def test_months_in_a_time_zone() -> None:
    assert month_of(LAST_EVENING, NEW_YORK) == date(2026, 1, 1)
    assert month_of(LAST_EVENING, ZoneInfo("UTC")) == date(2026, 2, 1)
    assert month_of(NEXT_MORNING, NEW_YORK) == date(2026, 2, 1)
    # Summer time: April starts at 22:00 UTC on 31 March in Paris.
    start, end = month_bounds(date(2026, 4, 1), ZoneInfo("Europe/Paris"))
    assert start.astimezone(UTC) == datetime(2026, 3, 31, 22, 0, tzinfo=UTC)
    assert end.astimezone(UTC) == datetime(2026, 4, 30, 22, 0, tzinfo=UTC)
    assert next_month(date(2026, 12, 1)) == date(2027, 1, 1)
    assert previous_month(date(2026, 1, 1)) == date(2025, 12, 1)
    assert parse_month("2026-03") == date(2026, 3, 1)
    assert parse_month("March") is None and parse_month(None) is None and parse_month("2026-13") is None
    # Years a page cannot show (its charts reach back three months, time zones shift a day) are not months.
    assert parse_month("0001-01") is None and parse_month("9999-12") is None and parse_month("1900-01") is not None


def test_the_month_rolls_over_at_midnight_in_the_organisations_time_zone(world: World) -> None:
    category = world.other_category  # New York, 1,000,000 tokens
    use(category, 1_000_000, now=LAST_EVENING)
    with pytest.raises(state.CategoryExhausted) as refused:
        services.ensure_room(category, 1, LAST_EVENING)
    assert "It resets on 1 February 2026 at midnight (America/New_York)" in str(refused.value)
    with pytest.raises(BudgetExceeded):
        reservations.reserve(category.pk, 1, LAST_EVENING)
    # An hour later in New York, February has begun there: the category has its whole budget again.
    services.ensure_room(category, 1_000_000, NEXT_MORNING)
    use(category, 10, now=NEXT_MORNING)
    months = dict(CategoryMonth.objects.filter(category=category).values_list("month", "used"))
    assert months == {date(2026, 1, 1): 1_000_000, date(2026, 2, 1): 10}


def test_the_same_instant_is_another_month_for_another_time_zone(world: World) -> None:
    world.other.time_zone = "UTC"
    world.other.save()
    category = world.other_category
    category.refresh_from_db()
    use(category, 5, now=LAST_EVENING)
    assert CategoryMonth.objects.get(category=category).month == date(2026, 2, 1)


def test_a_raise_runs_through_its_end_date_in_the_organisations_time_zone(world: World) -> None:
    category = world.other_category
    BudgetRaise.objects.create(
        category=category, tokens=500, reason="Audit", ends_on=date(2026, 1, 15), created_by_name="mallory"
    )
    last_minute = datetime(2026, 1, 15, 23, 59, tzinfo=NEW_YORK)  # already 16 January in UTC
    assert state.state_of(category, last_minute).budget == 1_000_500
    assert state.state_of(category, datetime(2026, 1, 16, 0, 1, tzinfo=NEW_YORK)).budget == 1_000_000


def test_chart_scales_end_on_round_numbers() -> None:
    assert [nice_ceiling(v) for v in (0, 0.0042, 7, 105, 130, 4_100)] == [1.0, 0.005, 8, 120, 150, 5_000]
