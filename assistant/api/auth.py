"""The API's key: ``Authorization: Bearer <key>``, checked against the address's and the key's limits (``limits``)."""

from __future__ import annotations

from typing import cast

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja.security import HttpBearer

from assistant.orgs import keys
from assistant.orgs.models import ApiKey
from assistant.orgs.signin import client_address

from . import limits
from .errors import ApiError


def _authenticate(request: HttpRequest, token: str) -> ApiKey | None:
    """The usable key ``token`` is, after the address's and the key's limits (``limits``); None: 401."""
    address = client_address(request)
    limits.refuse_blocked(address)
    key = keys.find(token)
    if key is None or not key.is_usable():
        limits.failed_key(address)
        if key is not None and key.is_expired:
            end = key.expires.isoformat() if key.expires else ""
            message = (
                f"This API key was replaced by a rotation; its grace period ended at {end}."
                if key.rotated
                else f"This API key expired at {end}."
            )
            raise ApiError(401, "expired_api_key", message)
        return None
    limits.take_request(key)
    keys.touch(key)
    return key


class KeyAuth(HttpBearer):
    async def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        return await sync_to_async(_authenticate)(request, token)


def key_of(request: HttpRequest) -> ApiKey:
    """The key the request was authenticated with."""
    return cast(ApiKey, request.auth)  # type: ignore[attr-defined]  # django-ninja sets request.auth after authentication; HttpRequest's stubs do not have it
