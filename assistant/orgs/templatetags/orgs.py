from __future__ import annotations

from django import template
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from assistant.orgs.models import Membership

register = template.Library()


@register.filter
def is_org_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Whether the user administers their organisation (the one ``organisation_of`` picks)."""
    if not user.is_authenticated:
        return False
    first = Membership.objects.filter(user__pk=user.pk).order_by("pk").first()
    return first is not None and first.role == "admin"
