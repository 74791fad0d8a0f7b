"""Signing in: the client's address, the page a locked-out account or address gets, and password reset.

django-axes counts failed sign-ins (settings: ``SIGNIN_*``); once an account or an address is over the
limit, its sign-ins are refused, even with the right password, until the lock-out time has passed
since the last failure. ``locked_out`` is the page it then answers with: the sign-in form again, with
the time to wait, status 429. A password reset by e-mail (Django's views) clears the account's count;
its requests are limited per address (``PASSWORD_RESET_LIMIT`` an hour), so that the form cannot be used
to flood someone's mailbox.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from axes.backends import AxesStandaloneBackend
from axes.utils import reset as reset_attempts
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm, SetPasswordForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse_lazy
from django.utils.translation import gettext as _

from . import throttle

RESET_WINDOW_SECONDS = 3600


class SignInThrottle(AxesStandaloneBackend):  # type: ignore[misc]  # django-axes ships no types: its backend is Any
    """django-axes' backend (first in ``AUTHENTICATION_BACKENDS``), also for ``aauthenticate``, which it
    lacks: an async sign-in is refused for a locked-out account or address as a sync one is."""

    async def aauthenticate(self, request: HttpRequest | None, **credentials: Any) -> None:
        await sync_to_async(self.authenticate)(request, **credentials)


def client_address(request: HttpRequest) -> str:
    """The client's address: the connection's, or the one ``TRUSTED_PROXY_COUNT`` proxies saw and forwarded.

    Each proxy appends the address it received from; the client-supplied part of the header (on the left)
    is never trusted.
    """
    remote = str(request.META.get("REMOTE_ADDR") or "")
    proxies = settings.TRUSTED_PROXY_COUNT
    if proxies <= 0:
        return remote
    forwarded = [a.strip() for a in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",") if a.strip()]
    return forwarded[-proxies] if len(forwarded) >= proxies else remote


def locked_out(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """The sign-in page refusing a locked-out account or address (django-axes' ``AXES_LOCKOUT_CALLABLE``).

    django-axes calls it with the original response and the credentials, or (under ASGI) with the
    credentials only: neither is needed here.
    """
    context = {
        "form": AuthenticationForm(request),
        "next": request.POST.get("next", "") if request.method == "POST" else "",
        "locked_out_minutes": settings.SIGNIN_LOCKOUT_MINUTES,
    }
    return render(request, "registration/login.html", context, status=429)


class PasswordResetView(auth_views.PasswordResetView):
    """Django's view, at most ``PASSWORD_RESET_LIMIT`` requests an hour from one address (then 429)."""

    def form_valid(self, form: PasswordResetForm) -> HttpResponse:
        sent, wait = throttle.count(f"reset:{client_address(self.request)}", RESET_WINDOW_SECONDS)
        if sent > settings.PASSWORD_RESET_LIMIT:
            minutes = max(1, round(wait / 60))
            form.add_error(None, _("Too many reset requests from here; try again in %(n)s min.") % {"n": minutes})
            response = self.form_invalid(form)
            response.status_code = 429
            return response
        return super().form_valid(form)


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Django's view; a new password also clears the failed sign-ins recorded for the account (its lock-out)."""

    success_url = reverse_lazy("password_reset_complete")

    def form_valid(self, form: SetPasswordForm[Any]) -> HttpResponse:
        response = super().form_valid(form)
        reset_attempts(username=form.user.get_username())
        return response
