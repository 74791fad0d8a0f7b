"""Admission: the category a request is charged to, and its refusal, before anything is saved, when the category
cannot take the request's first call.

The month's state is in ``state``, the holds in ``reservations``, raises and alerts in ``alerts``.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from assistant.catalogue import snapshot
from assistant.engine.errors import RequestRefused
from assistant.engine.refusals import Refusal
from assistant.engine.tokens import estimate_tokens
from assistant.orgs.models import Organisation

from .alerts import check_alerts
from .models import Category
from .months import month_of, zone
from .reservations import Place, month_room
from .state import CategoryExhausted, state_of


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


def ensure_room(category: Category, tokens: int, now: datetime | None = None) -> Place | None:
    """Refuse a request, before any model call, when its category cannot take its first call; else the category's
    month row (``Place``), when it has one already.

    One statement says whether it fits and which row is the month's (``reservations.month_room``); only a request that does not reads
    the month's full state.
    """
    now = now or timezone.now()
    tz = zone(category.organisation.time_zone)
    month = month_of(now, tz)
    room, row_id = month_room(category.pk, month, now.astimezone(tz).date())
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
    really needs (``reservations.reserve_for_run``).
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
