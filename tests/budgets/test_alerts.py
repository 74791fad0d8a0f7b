"""Alerts at 80 % and 100 % of a category's budget: recorded once per threshold and month, emailed to
the organisation's admins through Django's email backend, shown to admins in the app."""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import async_to_sync
from django.core import mail
from django.utils import translation
from pytest_django import Settings

from assistant.budgets import alerts, reservations, services, state
from assistant.budgets.ledger import CategoryLedger
from assistant.budgets.models import BudgetAlert, BudgetRaise
from assistant.engine.errors import BudgetExceeded
from assistant.engine.types import UsagePart
from tests.budgets.budgets_support import World, signed_in, this_month, use

PARIS = ZoneInfo("Europe/Paris")


def _small(world: World, tokens: int = 1_000) -> None:
    world.administration.monthly_tokens = tokens
    world.administration.save()


def test_each_threshold_alerts_once_a_month_by_email_to_the_admins(world: World) -> None:
    _small(world)
    use(world.administration, 790)
    assert not BudgetAlert.objects.exists() and not mail.outbox
    use(world.administration, 20)  # 81 %
    assert list(BudgetAlert.objects.values_list("threshold", flat=True)) == [80]
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["demo@example.com"]  # the admin; not mia, a member
    assert "“Administration” is at 80 % of its monthly budget" in message.subject
    assert "810 of its 1,000 tokens" in message.body
    use(world.administration, 50)  # 86 %: no new alert
    assert len(mail.outbox) == 1
    use(world.administration, 140)  # 100 %
    assert sorted(BudgetAlert.objects.values_list("threshold", flat=True)) == [80, 100]
    assert len(mail.outbox) == 2 and "at 100 %" in mail.outbox[1].subject
    assert BudgetAlert.objects.get(threshold=100).emailed_to == ["demo@example.com"]
    use(world.catalogue, 10)  # another category's calls never alert for this one
    assert len(mail.outbox) == 2


def test_a_refused_call_alerts_at_the_true_share_not_at_100_percent(world: World) -> None:
    _small(world)
    use(world.administration, 850)  # 85 %: the 80 % alert
    with pytest.raises(BudgetExceeded):
        reservations.reserve(world.administration.pk, 500)  # does not fit; the category is still at 85 %
    assert sorted(BudgetAlert.objects.values_list("threshold", flat=True)) == [80]
    assert len(mail.outbox) == 1 and "(85 %)" in mail.outbox[0].body
    with pytest.raises(state.CategoryExhausted) as refused, translation.override("en"):
        services.ensure_room(world.administration, 500)
    assert "has used 850 of 1,000 tokens this month (85 %)" in str(refused.value)
    assert refused.value.spent and refused.value.retry_after > 60
    use(world.administration, 150)  # 100 % used: now the 100 % alert
    assert sorted(BudgetAlert.objects.values_list("threshold", flat=True)) == [80, 100]


def test_a_new_month_alerts_again(world: World) -> None:
    _small(world)
    use(world.administration, 900, now=datetime(2026, 1, 20, tzinfo=PARIS))
    use(world.administration, 900, now=datetime(2026, 2, 3, tzinfo=PARIS))
    assert sorted(BudgetAlert.objects.values_list("month", "threshold")) == [
        (datetime(2026, 1, 1).date(), 80),
        (datetime(2026, 2, 1).date(), 80),
    ]
    assert len(mail.outbox) == 2


def test_thresholds_are_set_per_category(world: World) -> None:
    _small(world)
    world.administration.alert_thresholds = [50, 90]
    world.administration.save()
    use(world.administration, 600)
    assert list(BudgetAlert.objects.values_list("threshold", flat=True)) == [50]


def test_two_processes_crossing_the_same_threshold_record_it_once(world: World) -> None:
    _small(world)
    use(world.administration, 900)
    current = state.state_of(world.administration)
    assert alerts.check_alerts(current) == []  # already recorded by the call that crossed it
    BudgetAlert.objects.all().delete()
    first, second = alerts.check_alerts(current), alerts.check_alerts(current)
    assert len(first) == 1 and second == []


def test_a_mail_server_down_does_not_fail_the_call(world: World, settings: Settings) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_PORT = 1  # nothing listens there
    _small(world)
    use(world.administration, 900)
    alert = BudgetAlert.objects.get()
    assert alert.emailed_to == []  # recorded, shown in the app, not marked as emailed


def test_admins_see_open_alerts_in_the_app_and_mark_them_seen(world: World) -> None:
    _small(world)
    use(world.administration, 900)
    admin = signed_in("demo")
    header = admin.get("/").content.decode()
    assert 'class="badge alerts"' in header and ">1</span>" in header
    page = admin.get("/settings/usage/").content.decode()
    assert "“Administration” reached 80 % of its monthly budget (900 of 1,000 tokens)." in page
    assert "emailed to demo@example.com" in page
    # A member sees no alert; another organisation's admin neither.
    assert 'class="badge alerts"' not in signed_in("mia").get("/").content.decode()
    assert 'class="badge alerts"' not in signed_in("mallory").get("/").content.decode()
    alert = BudgetAlert.objects.get()
    assert signed_in("mallory").post(f"/settings/usage/alerts/{alert.pk}/seen").status_code == 404
    assert signed_in("mia").post(f"/settings/usage/alerts/{alert.pk}/seen").status_code == 403
    response = admin.post(f"/settings/usage/alerts/{alert.pk}/seen")
    assert response.status_code == 302
    alert.refresh_from_db()
    assert alert.seen is not None and alert.seen_by == world.admin
    assert 'class="badge alerts"' not in admin.get("/").content.decode()
    assert "seen by demo on" in admin.get("/settings/usage/").content.decode()


def test_a_runs_calls_alert_once_per_threshold_and_see_a_raise_made_while_it_runs(world: World) -> None:
    """The ledger of one run keeps its category's month row: its calls still alert once per threshold, and
    the budget each call is checked against is read when it reserves (a raise made mid-run counts)."""
    _small(world)
    ledger = CategoryLedger(world.administration.pk)

    @async_to_sync
    async def call(tokens: int) -> None:
        held = await ledger.reserve("demo-small", tokens)
        await ledger.settle(held, "demo-small", UsagePart(prompt_tokens=tokens, completion_tokens=0), 0.0)
        await ledger.drain()  # written now, not with the next reservation

    call(790)
    assert not BudgetAlert.objects.exists()
    call(20)  # 81 %
    assert list(BudgetAlert.objects.values_list("threshold", flat=True)) == [80] and len(mail.outbox) == 1
    call(50)  # 86 %: no new alert
    assert len(mail.outbox) == 1
    with pytest.raises(BudgetExceeded):
        call(200)  # 860 + 200 > 1,000
    BudgetRaise.objects.create(
        category=world.administration, tokens=1_000, reason="Audit", ends_on=date(2999, 1, 1), created_by_name="demo"
    )
    call(900)  # fits in the raised budget: 1,760 of 2,000, 88 %
    assert len(mail.outbox) == 1
    call(240)  # 100 % of the raised budget
    assert sorted(BudgetAlert.objects.values_list("threshold", flat=True)) == [80, 100] and len(mail.outbox) == 2
    row = this_month(world.administration)
    assert (row.used, row.reserved, row.calls) == (2_000, 0, 5)
