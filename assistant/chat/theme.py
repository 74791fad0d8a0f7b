"""Light or dark: the browser's ``prefers-color-scheme`` unless the user chose, in a cookie the server reads.

The server puts the choice on ``<html data-theme>`` (``theme`` below, a context processor), so the first paint
has the right colours without an inline script; ``static/js/chat.js`` switches at once and writes the cookie,
and ``set_theme`` does the same without JavaScript.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

COOKIE = "theme"
THEMES = ("light", "dark")
MAX_AGE = 365 * 24 * 3600


def chosen(request: HttpRequest) -> str:
    """``light``, ``dark``, or ``""`` (none chosen: the browser's preference)."""
    value = request.COOKIES.get(COOKIE, "")
    return value if value in THEMES else ""


def theme(request: HttpRequest) -> dict[str, str]:
    return {"theme": chosen(request)}


@require_POST
def set_theme(request: HttpRequest) -> HttpResponse:
    """The toggle without JavaScript: remember the theme asked for, back to the page."""
    value = request.POST.get("theme", "")
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = "/"
    response = HttpResponseRedirect(back)
    if value in THEMES:
        response.set_cookie(COOKIE, value, max_age=MAX_AGE, samesite="Lax", secure=request.is_secure())
    else:
        response.delete_cookie(COOKIE)
    return response
