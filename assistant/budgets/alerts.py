"""Raises an admin grants a category, and the alerts its month records (once per threshold) and e-mails to the admins."""

from __future__ import annotations

import logging
from datetime import date

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import translation
from django.utils.translation import gettext as _

from assistant.orgs import audit
from assistant.orgs.models import Organisation
from assistant.orgs.services import admin_emails, is_admin

from .models import BudgetAlert, BudgetRaise, Category
from .months import zone
from .state import CategoryState

log = logging.getLogger(__name__)


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
