"""The organisation of a request, and its policy as the engine understands it."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import Http404

from assistant.engine.policy import Policy

from .models import Organisation


def organisation_of(user: AbstractBaseUser | AnonymousUser) -> Organisation:
    """The user's organisation; a user with none reaches nothing (404)."""
    org = Organisation.objects.filter(memberships__user__pk=user.pk).order_by("memberships__pk").first()
    if org is None:
        raise Http404("You are not a member of any organisation.")
    return org


def policy_for(org: Organisation) -> Policy:
    allowed = frozenset(org.allowed_models) if org.allowed_models is not None else None
    return Policy(allowed_models=allowed)
