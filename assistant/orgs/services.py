"""The organisation of a request, who may administer it, and its policy as the engine understands it."""

from __future__ import annotations

from typing import cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404

from assistant.engine.policy import LEVELS, AgentProfile, Level, LevelSettings, Policy, ResourceKind
from assistant.engine.types import Effort

from .models import DELEGATING_LEVELS, ApiKey, Membership, Organisation, ReasoningLevel


def organisation_of(user: User) -> Organisation:
    """The user's organisation; a user with none reaches nothing (404)."""
    org = Organisation.objects.filter(memberships__user__pk=user.pk).order_by("memberships__pk").first()
    if org is None:
        raise Http404("You are not a member of any organisation.")
    return org


def is_admin(user: User, org: Organisation) -> bool:
    return Membership.objects.filter(organisation=org, user__pk=user.pk, role="admin").exists()


def admin_emails(org: Organisation) -> list[str]:
    """The e-mail addresses of the organisation's active admins (those who have one), sorted, each once."""
    emails = (
        get_user_model()
        .objects.filter(memberships__organisation=org, memberships__role="admin", is_active=True)
        .values_list("email", flat=True)
    )
    return sorted({email for email in emails if email})


def administered_organisation(user: User) -> Organisation:
    """The user's organisation if they administer it; a member gets 403, a user with none 404."""
    org = organisation_of(user)
    if not is_admin(user, org):
        raise PermissionDenied("Only an admin of the organisation can change its settings.")
    return org


def lock_organisation(org: Organisation) -> None:
    """Inside a transaction: wait for, then hold, the organisation's row until the transaction ends.

    Forms whose limits span rows (at most 4 categories, unique names) check and save under it, so
    that concurrent posts are checked one after the other (PostgreSQL: ``SELECT … FOR UPDATE``;
    SQLite: every transaction begins ``IMMEDIATE`` and holds the database's write lock).
    """
    list(Organisation.objects.select_for_update().filter(pk=org.pk).values_list("pk", flat=True))


def levels_of(org: Organisation) -> list[ReasoningLevel]:
    """The four levels in order, saved rows first, else the engine's defaults (unsaved)."""
    saved = {row.level: row for row in org.reasoning_levels.all()}
    return [saved.get(lv) or ReasoningLevel.default(org, lv) for lv in LEVELS]


def policy_for(org: Organisation, api_key: ApiKey | None = None) -> Policy:
    """The engine's ``Policy`` from what the organisation's admins set (sync: call it off the event loop).

    A run of the API follows its key's model restriction instead of the assistant's: a key with
    none keeps the whole catalogue.
    """
    models = api_key.allowed_models if api_key is not None else org.allowed_models
    allowed = frozenset(models) if models is not None else None
    levels: dict[Level, LevelSettings] = {
        cast(Level, row.level): LevelSettings(
            effort=cast(Effort, row.effort) if row.effort else None,
            main_rounds=row.main_rounds,
            # Below Approfondi the agents tool is ignored, whatever a row says.
            agent_rounds=row.agent_rounds if row.level in DELEGATING_LEVELS else 0,
        )
        for row in levels_of(org)
    }
    profiles = {
        p.name: AgentProfile(
            name=p.name,
            instructions=p.instructions,
            default_model=p.default_model or None,
            tools=frozenset(cast(list[ResourceKind], p.tools)),
        )
        for p in org.agent_profiles.all()
    }
    approfondi = levels["approfondi"]
    return Policy(
        allowed_models=allowed,
        levels=levels,
        max_parallel_agents=org.max_parallel_agents,
        # A request with no level (the API) gets Approfondi's budgets, the engine's defaults before any edit: as a
        # level's, they are ceilings (no delegation asks for more rounds).
        default_main_rounds=approfondi.main_rounds,
        default_agent_rounds=approfondi.agent_rounds,
        profiles=profiles,
    )
