"""The audit log: every admin change of an organisation's settings, API keys, budgets and knowledge bases.

The views (and services) that make a change call ``record`` once it is saved. An entry stores an action
code, never a sentence: ``ACTIONS`` words it in the reader's language when the page shows it.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import formats, timezone
from django.utils.dateparse import parse_datetime
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from .models import AuditEntry, Organisation

ACTIONS: dict[str, Promise] = {
    "models.saved": _("changed the models the assistant may use"),
    "levels.saved": _("changed the reasoning levels or the parallel-agent cap"),
    "profile.created": _("created an agent profile"),
    "profile.updated": _("changed an agent profile"),
    "profile.deleted": _("deleted an agent profile"),
    "key.created": _("created an API key"),
    "key.rotated": _("rotated an API key"),
    "key.revoked": _("revoked an API key"),
    "spend.default_saved": _("changed the members' default spend limit"),
    "spend.member_saved": _("changed a member's spend limit"),
    "category.created": _("created a budget category"),
    "categories.saved": _("changed the budget categories"),
    "budget.raised": _("raised a category budget"),
    "time_zone.saved": _("changed the budgets' time zone"),
    "landing_watch.saved": _("changed the forced-landing alert threshold"),
    "kb.created": _("created a knowledge base"),
    "kb.updated": _("renamed or edited a knowledge base"),
    "kb.deleted": _("deleted a knowledge base"),
    "connector.created": _("registered a connector"),
    "connector.updated": _("changed a connector"),
    "connector.deleted": _("deleted a connector"),
}


def record(
    actor: User | AnonymousUser | None, org: Organisation, action: str, target: str = "", **details: Any
) -> AuditEntry:
    """Log that ``actor`` did ``action`` (a code of ``ACTIONS``) on ``target`` in ``org``, with ``details``."""
    if action not in ACTIONS:
        raise ValueError(f"Unknown audit action '{action}'.")
    user = actor if isinstance(actor, User) else None
    # Stored as JSON: dates, decimals and lazy strings as text.
    clean = json.loads(json.dumps(details, cls=DjangoJSONEncoder, default=str))
    return AuditEntry.objects.create(
        organisation=org,
        actor=user,
        actor_name=user.get_username() if user else "",
        action=action,
        target=str(target)[:200],
        details=clean,
    )


def saved(
    actor: User | AnonymousUser | None, org: Organisation, kind: str, created: bool, target: str, **details: Any
) -> AuditEntry:
    """``record`` of ``<kind>.created`` or ``<kind>.updated``."""
    return record(actor, org, f"{kind}.{'created' if created else 'updated'}", target, **details)


def wording(action: str) -> str:
    """The action in the active language (an unknown code, e.g. from a newer version, as it is)."""
    label = ACTIONS.get(action)
    return str(label) if label is not None else action


# The details' names as the page shows them; a name not here (a level, a category) shows as it is.
DETAIL_LABELS: dict[str, Promise] = {
    "allowed": _("models"),
    "models": _("models"),
    "expires": _("expires"),
    "rate_limit": _("requests per minute"),
    "new_key": _("new key"),
    "old_key_until": _("old key works until"),
    "changed": _("fields changed"),
    "previous": _("previous name"),
    "slug": _("address"),
    "documents": _("documents"),
    "tokens": _("tokens"),
    "until": _("until"),
    "reason": _("reason"),
    "time_zone": _("time zone"),
    "monthly_tokens": _("monthly tokens"),
    "alert_thresholds": _("alerts at (%)"),
    "default": _("default category"),
    "name": _("name"),
    "max_parallel_agents": _("agents at once"),
    "effort": _("effort"),
    "main_rounds": _("main-model rounds"),
    "agent_rounds": _("agent round budget"),
    "url": _("address"),
    "tools": _("tools offered"),
    "headers": _("headers"),
    "enabled": _("offered to requests"),
    "monthly_eur": _("EUR per month"),
    "limit_mode": _("when the limit is reached"),
}
# What None means for a detail (else "—").
NONE_MEANS: dict[str, Promise] = {
    "allowed": _("the whole catalogue"),
    "models": _("the whole catalogue"),
    "expires": _("never"),
    "rate_limit": _("the server's default"),
    "monthly_eur": _("no limit"),
}


# A detail's coded values as the page words them.
VALUE_WORDS: dict[str, dict[str, Promise]] = {
    "limit_mode": {
        "hard": _("hard cap"),
        "alert": _("alert"),
        "none": _("no limit"),
        "default": _("the organisation's default"),
    },
}


def _label(name: str) -> str:
    label = DETAIL_LABELS.get(name)
    return str(label) if label is not None else name.replace("_", " ")


def _value(name: str, value: Any) -> str:
    if value is None:
        meaning = NONE_MEANS.get(name)
        return str(meaning) if meaning is not None else "—"
    words = VALUE_WORDS.get(name, {})
    if isinstance(value, str) and value in words:
        return str(words[value])
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "—"
    if isinstance(value, dict):
        return "; ".join(f"{_label(k)}: {_value(k, v)}" for k, v in value.items())
    if isinstance(value, str) and "T" in value:
        moment = parse_datetime(value)
        if moment is not None:
            return formats.date_format(timezone.localtime(moment), "SHORT_DATETIME_FORMAT")
    return str(value)


def details_text(details: dict[str, Any]) -> list[str]:
    """``name: value`` lines for the page, in the active language."""
    return [f"{_label(name)}: {_value(name, value)}" for name, value in details.items()]
