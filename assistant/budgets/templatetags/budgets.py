from __future__ import annotations

from django import template
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils import formats

from assistant.budgets.models import BudgetAlert, LandingAlert
from assistant.orgs.models import Membership

register = template.Library()


@register.filter
def open_budget_alerts(user: AbstractBaseUser | AnonymousUser) -> int:
    """Budget and forced-landing alerts of the user's organisation that no admin has marked as seen (0 for a
    member)."""
    if not user.is_authenticated:
        return 0
    first = Membership.objects.filter(user__pk=user.pk).order_by("pk").first()
    if first is None or first.role != "admin":
        return 0
    org_id = first.organisation_id
    budgets = BudgetAlert.objects.filter(category__organisation_id=org_id, seen__isnull=True).count()
    return budgets + LandingAlert.objects.filter(organisation_id=org_id, seen__isnull=True).count()


@register.filter
def tokens(value: int | float | None) -> str:
    """12345678 → 12,345,678 (12 345 678 in French)."""
    return formats.number_format(int(value or 0), force_grouping=True)


@register.filter
def shown_profile(name: str | None, names: dict[str, str] | None) -> str | None:
    """An agent profile's name in the reader's language, from ``names`` (``AgentProfile.shown_names``); as written
    without other words."""
    return (names or {}).get(name, name) if name else name
