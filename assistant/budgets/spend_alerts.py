"""A spend limit's alerts: at 80 % and 100 % of it the admins and the member are e-mailed, once each per month
(``SpendAlert``)."""

from __future__ import annotations

import logging
import math

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import translation
from django.utils.translation import gettext as _

from assistant.orgs.services import admin_emails

from .models import SpendAlert, SpendMonth
from .months import month_bounds
from .spend_months import SpendPlace

log = logging.getLogger(__name__)


THRESHOLDS = (80, 100)
"""The shares of a limit at which the admins and the member are e-mailed and the chat shows a banner."""


def check_alerts(place: SpendPlace, used_eur: float) -> list[SpendAlert]:
    """Record (and e-mail) each threshold of the limit the month crossed, once."""
    limit = place.limit.eur
    percent = 100.0 * used_eur / limit if limit else 100.0
    due = {t for t in THRESHOLDS if t <= percent} - place.alerted
    if not due:
        return []
    known = set(SpendAlert.objects.filter(spend_id=place.row_id).values_list("threshold", flat=True))
    alerts = []
    for threshold in sorted(due - known):
        try:
            with transaction.atomic():
                alerts.append(
                    SpendAlert.objects.create(
                        spend_id=place.row_id, threshold=threshold, used_eur=used_eur, limit_eur=limit
                    )
                )
        except IntegrityError:
            pass  # another request recorded it first: it is sent once
    place.alerted |= due
    if alerts:
        _email(place, alerts, used_eur)
    return alerts


def _email(place: SpendPlace, alerts: list[SpendAlert], used_eur: float) -> None:
    row = SpendMonth.objects.select_related("organisation", "user", "api_key").get(pk=place.row_id)
    org = row.organisation
    recipients = admin_emails(org)
    if row.user is not None and row.user.email and row.user.email not in recipients:
        recipients.append(row.user.email)
    if not recipients:
        return
    threshold = max(a.threshold for a in alerts)
    resets = month_bounds(place.month, place.tz)[1]
    with translation.override(settings.LANGUAGE_CODE):
        whose = (
            _("the API key “%(name)s”") % {"name": row.api_key.name}
            if row.api_key is not None
            else (row.user.get_username() if row.user is not None else "?")
        )
        subject = _("%(org)s: %(whose)s is at %(threshold)s %% of its monthly spend limit") % {
            "org": org.name,
            "whose": whose,
            "threshold": threshold,
        }
        kind = _("a hard cap: its requests are refused") if place.limit.hard else _("an alert: nothing is refused")
        body = _(
            "%(whose)s has spent %(used)s EUR of its monthly spend limit of %(limit)s EUR in %(org)s (%(percent)s %%).\n"
            "The limit is %(kind)s once it is reached, until it resets on %(date)s at midnight (%(zone)s). "
            "An admin can change it in the settings.\n"
        ) % {
            "whose": whose,
            "used": f"{used_eur:.2f}",
            "limit": f"{place.limit.eur:.2f}",
            "org": org.name,
            "percent": math.floor(100.0 * used_eur / place.limit.eur) if place.limit.eur else 100,
            "kind": kind,
            "date": resets.date().isoformat(),
            "zone": place.tz.key,
        }
    try:
        send_mail(subject, body, None, recipients)
    except Exception:
        log.exception("could not email the spend alert of %s", row)
        return
    SpendAlert.objects.filter(pk__in=[a.pk for a in alerts]).update(emailed_to=recipients)
