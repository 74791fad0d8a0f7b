"""Organisation API keys: created with a secret shown once, stored as a digest, revoked, looked up.

A key is 256 random bits, so a plain SHA-256 digest is enough to store it (a slow password hash
protects guessable secrets; this one is not guessable) and lets a request find its key in one
indexed query. Runs of the API belong to the organisation's service user (``api_user``): an
inactive account with no password and no membership, so it can never sign in and its
conversations show in no one's sidebar, while the budgets report still names it.

A key may expire (``expires``, chosen at creation). Rotating a key makes a new one with the same name,
models, expiry and rate limit, and leaves the old one working for a grace period
(``API_KEY_ROTATION_GRACE_HOURS``), so that clients can move to the new one; then it opens nothing.
"""

from __future__ import annotations

import hashlib
import secrets
import zoneinfo
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from .models import ApiKey, Organisation

KEY_PREFIX = "sk-org-"
SHOWN_CHARS = 12


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(
    org: Organisation,
    name: str,
    models: Iterable[str] | None = None,
    created_by: User | None = None,
    *,
    expires: datetime | None = None,
    rate_limit: int | None = None,
    monthly_eur: Decimal | None = None,
    hard_cap: bool = True,
) -> tuple[ApiKey, str]:
    """A new key of ``org`` and its secret: the only time the secret exists in clear. ``monthly_eur``: its spend
    limit per month, a hard cap unless ``hard_cap`` is false (an alert)."""
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        organisation=org,
        name=name.strip() or "API key",
        prefix=secret[:SHOWN_CHARS],
        digest=digest_of(secret),
        allowed_models=list(models) if models is not None else None,
        created_by=created_by,
        expires=expires,
        rate_limit=rate_limit,
        monthly_eur=monthly_eur,
        limit_mode="hard" if hard_cap else "alert",
    )
    return key, secret


def find(secret: str) -> ApiKey | None:
    """The key this secret is, usable or not (revoked, expired), or None (unknown or malformed)."""
    if not secret.startswith(KEY_PREFIX):
        return None
    return ApiKey.objects.select_related("organisation").filter(digest=digest_of(secret)).first()


TOUCH_SECONDS = 60
"""``last_used`` is kept to the minute: a key sending many requests writes it once a minute, not once a request."""


def touch(key: ApiKey) -> None:
    now = timezone.now()
    if key.last_used is None or (now - key.last_used).total_seconds() >= TOUCH_SECONDS:
        ApiKey.objects.filter(pk=key.pk).update(last_used=now)
        key.last_used = now


def authenticate(secret: str) -> ApiKey | None:
    """The usable key this secret opens, or None (unknown, malformed, revoked or expired)."""
    key = find(secret)
    if key is None or not key.is_usable():
        return None
    touch(key)
    return key


def end_of(day: date, time_zone: str) -> datetime:
    """The moment a key chosen to work until ``day`` stops: the midnight after it, in ``time_zone``."""
    return datetime.combine(day + timedelta(days=1), time(), tzinfo=zoneinfo.ZoneInfo(time_zone))


def grace_period() -> timedelta:
    return timedelta(hours=settings.API_KEY_ROTATION_GRACE_HOURS)


def rotate(key: ApiKey, by: User | None = None) -> tuple[ApiKey, str]:
    """A new key in place of ``key`` (same name, models, expiry, rate limit, spend limit), and its secret; the old
    one keeps working for the grace period, then opens nothing."""
    if not key.is_usable() or key.rotated is not None:
        raise ValueError("Only a usable key that was not rotated yet can be rotated.")
    now = timezone.now()
    with transaction.atomic():
        new, secret = create_key(
            key.organisation,
            key.name,
            key.allowed_models,
            by,
            expires=key.expires,
            rate_limit=key.rate_limit,
            monthly_eur=key.monthly_eur,
            hard_cap=key.limit_mode == "hard",
        )
        end = now + grace_period()
        key.rotated = now
        key.replaced_by = new
        key.expires = min(key.expires, end) if key.expires is not None else end
        key.save(update_fields=["rotated", "replaced_by", "expires"])
    return new, secret


def revoke(key: ApiKey) -> None:
    """From now on the key opens nothing; runs it started go on and stay recorded."""
    if key.revoked is None:
        key.revoked = timezone.now()
        key.save(update_fields=["revoked"])


def api_user(org: Organisation) -> User:
    """The organisation's service user, owner of the API's conversations and runs."""
    user, created = get_user_model().objects.get_or_create(username=f"api@{org.slug}", defaults={"is_active": False})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user
