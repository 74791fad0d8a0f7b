"""What an htmx request gets when it cannot be answered with its fragment: the page is never replaced.

- A refused form is answered 422 by its view (``REFUSED``) with the form again, its errors and the typed
  text; ``base.html``'s ``htmx-config`` swaps 422 in place of the form.
- A redirect (a form saved, or a signed-out user sent to sign in) is a redirect of the whole page
  (``HX-Redirect``): htmx would otherwise follow it itself and swap the next page into the form. A user whose
  session expired goes to the sign-in page with ``next`` set to the page they were on, whose draft is kept
  in the browser (``static/js/chat.js``) and comes back once they are signed in again.
- A failed CSRF check (``csrf_failure``, the ``CSRF_FAILURE_VIEW``) says so next to the form that was sent.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode, urlsplit

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import resolve_url
from django.template.loader import render_to_string
from django.utils.decorators import sync_and_async_middleware
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.csrf import csrf_failure as django_csrf_failure
from django_htmx.http import HttpResponseClientRedirect

# A form that was understood and refused (a spent budget, a blank title, an invalid field).
REFUSED = 422

Handler = Callable[[HttpRequest], HttpResponseBase]
AsyncHandler = Callable[[HttpRequest], Awaitable[HttpResponseBase]]


def _is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def _page_of(request: HttpRequest) -> str:
    """The path (and query) of the page that sent an htmx request, if it is one of this site's."""
    current = request.headers.get("HX-Current-URL", "")
    if not current or not url_has_allowed_host_and_scheme(
        current, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return ""
    parts = urlsplit(current)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _for_htmx(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    if not _is_htmx(request) or response.status_code not in (301, 302, 303, 307, 308):
        return response
    location = response["Location"]
    login = resolve_url(settings.LOGIN_URL)
    if urlsplit(location).path == login:
        # Signed out (the session expired): sign in, then back to the page, where the draft waits.
        page = _page_of(request)
        location = f"{login}?{urlencode({'next': page})}" if page else login
    redirect = HttpResponseClientRedirect(location)
    redirect.cookies = response.cookies  # e.g. the theme chosen, or a language
    return redirect


@sync_and_async_middleware
def htmx_redirects(get_response: Handler | AsyncHandler) -> Handler | AsyncHandler:
    """Turns the redirects answering htmx requests into redirects of the page (after HtmxMiddleware)."""
    if iscoroutinefunction(get_response):

        async def middleware_async(request: HttpRequest) -> HttpResponseBase:
            response = await get_response(request)
            return _for_htmx(request, response)

        return middleware_async

    def middleware(request: HttpRequest) -> HttpResponseBase:
        return _for_htmx(request, get_response(request))  # type: ignore[arg-type]  # the sync path: get_response returns a response, not an awaitable, here

    return middleware


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A failed CSRF check: in place of nothing, a notice next to the form that was sent (htmx), else
    Django's page."""
    if not _is_htmx(request):
        return django_csrf_failure(request, reason)
    message = _(
        "This page is out of date (you signed in again, maybe in another tab), so it could not send this. "
        "Reload the page and send it again: your text is kept."
    )
    response = HttpResponse(
        render_to_string("_notice.html", {"message": message, "kind": "csrf"}, request=request), status=403
    )
    trigger = request.headers.get("HX-Trigger", "")
    if re.fullmatch(r"[A-Za-z][\w-]*", trigger):
        # Shown at the top of the form that was sent (static/js/chat.js lets this 403 be swapped).
        response["HX-Retarget"] = f"#{trigger}"
        response["HX-Reswap"] = "afterbegin"
        response["HX-Reselect"] = ".form-notice"  # not the form's own hx-select
    return response
