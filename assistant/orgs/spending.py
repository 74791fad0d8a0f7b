"""Which spend limit a run counts against: its API key's, else its member's (their own, else the organisation's
default for members). Only the setting; the month's counters and the checks are the budgets app's (``budgets.spend``).

An API request counts against its key's limit only (API runs belong to the organisation's service user); a member's
limit covers what they run in the chat and their scheduled tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from .models import ApiKey, Membership, Organisation

LimitKind = Literal["member", "key"]


@dataclass(frozen=True, slots=True)
class SpendLimit:
    """A monthly EUR limit that applies to a run: whose (``kind``), how much, and whether it is a hard cap."""

    kind: LimitKind
    monthly_eur: Decimal
    hard: bool
    inherited: bool = False
    """A member's limit that is the organisation's default (not their own)."""

    @property
    def eur(self) -> float:
        return float(self.monthly_eur)


def key_limit(key: ApiKey) -> SpendLimit | None:
    if key.monthly_eur is None:
        return None
    return SpendLimit("key", key.monthly_eur, key.limit_mode == "hard")


def member_limit(org: Organisation, membership: Membership | None) -> SpendLimit | None:
    """A member's limit: their own, else the organisation's default; None: none applies."""
    mode = membership.limit_mode if membership is not None else ""
    if mode == "none":
        return None
    if mode in ("hard", "alert") and membership is not None and membership.monthly_eur is not None:
        return SpendLimit("member", membership.monthly_eur, mode == "hard")
    if org.member_monthly_eur is None:
        return None
    return SpendLimit("member", org.member_monthly_eur, org.member_limit_mode == "hard", inherited=True)


def limit_for(org: Organisation, user_id: int | None, api_key: ApiKey | None) -> SpendLimit | None:
    """The limit a run of ``user_id`` (through ``api_key``, if any) counts against."""
    if api_key is not None:
        return key_limit(api_key)
    if user_id is None:
        return None
    membership = Membership.objects.filter(organisation=org, user_id=user_id).only("limit_mode", "monthly_eur").first()
    return member_limit(org, membership)
