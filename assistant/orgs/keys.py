"""Organisation API keys: created with a secret shown once, stored as a digest, revoked, looked up.

A key is 256 random bits, so a plain SHA-256 digest is enough to store it (a slow password hash
protects guessable secrets; this one is not guessable) and lets a request find its key in one
indexed query. Runs of the API belong to the organisation's service user (``api_user``): an
inactive account with no password and no membership, so it can never sign in and its
conversations show in no one's sidebar, while the budgets report still names it.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.utils import timezone

from .models import ApiKey, Organisation

KEY_PREFIX = "sk-org-"
SHOWN_CHARS = 12


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(
    org: Organisation, name: str, models: Iterable[str] | None = None, created_by: User | None = None
) -> tuple[ApiKey, str]:
    """A new key of ``org`` and its secret: the only time the secret exists in clear."""
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        organisation=org,
        name=name.strip() or "API key",
        prefix=secret[:SHOWN_CHARS],
        digest=digest_of(secret),
        allowed_models=list(models) if models is not None else None,
        created_by=created_by,
    )
    return key, secret


def authenticate(secret: str) -> ApiKey | None:
    """The active key this secret opens, or None (unknown, malformed or revoked)."""
    if not secret.startswith(KEY_PREFIX):
        return None
    key = ApiKey.objects.select_related("organisation").filter(digest=digest_of(secret), revoked__isnull=True).first()
    if key is not None:
        ApiKey.objects.filter(pk=key.pk).update(last_used=timezone.now())
    return key


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
