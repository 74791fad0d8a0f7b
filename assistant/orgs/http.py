"""The request that a view behind ``login_required`` receives, as the type checker should see it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from django.contrib.auth.models import User
from django.http import HttpRequest


class AuthenticatedHttpRequest(HttpRequest):
    """Only an annotation, never instantiated: ``login_required`` lets no anonymous user through, so
    the request's user is a ``User`` (the project keeps Django's user model)."""

    user: User
    auser: Callable[[], Awaitable[User]]
