"""The audit log: every admin change of an organisation's settings, API keys, budgets and knowledge bases.

The views (and services) that make a change call ``record`` once it is saved. An entry stores an action
code, never a sentence: ``ACTIONS`` words it in the reader's language when the page shows it.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.core.serializers.json import DjangoJSONEncoder
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
    "category.created": _("created a budget category"),
    "categories.saved": _("changed the budget categories"),
    "budget.raised": _("raised a category budget"),
    "time_zone.saved": _("changed the budgets' time zone"),
    "kb.created": _("created a knowledge base"),
    "kb.updated": _("renamed or edited a knowledge base"),
    "kb.deleted": _("deleted a knowledge base"),
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


def wording(action: str) -> str:
    """The action in the active language (an unknown code, e.g. from a newer version, as it is)."""
    label = ACTIONS.get(action)
    return str(label) if label is not None else action


def details_text(details: dict[str, Any]) -> list[str]:
    """``name: value`` lines for the page."""
    lines = []
    for name, value in details.items():
        if isinstance(value, list):
            shown = ", ".join(str(v) for v in value) or "—"
        elif isinstance(value, dict):
            shown = "; ".join(f"{k}: {v}" for k, v in value.items())
        elif value is None:
            shown = "—"
        else:
            shown = str(value)
        lines.append(f"{name.replace('_', ' ')}: {shown}")
    return lines
