"""The request that a view receives, as the type checker should see it (django-htmx's ``request.htmx``; behind
``login_required``, a signed-in user), and the response for a stored file (a CSV export, a document's original)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.utils.http import content_disposition_header
from django_htmx.middleware import HtmxDetails

# A stored file is downloaded, never shown as a page of this site: even one that a browser would read as
# HTML or SVG cannot run a script, load anything, or be framed.
ATTACHMENT_CSP = "default-src 'none'; sandbox"


class HtmxHttpRequest(HttpRequest):
    """Only an annotation, as django-htmx's documentation types it: ``HtmxMiddleware`` sets ``request.htmx``."""

    htmx: HtmxDetails


class AuthenticatedHttpRequest(HtmxHttpRequest):
    """Only an annotation, never instantiated: ``login_required`` lets no anonymous user through, so
    the request's user is a ``User`` (the project keeps Django's user model)."""

    user: User
    auser: Callable[[], Awaitable[User]]


def attachment_response(content: bytes | str, filename: str, content_type: str) -> HttpResponse:
    """``content`` as a download named ``filename``: ``Content-Disposition: attachment``, no MIME sniffing
    and a sandboxing Content-Security-Policy (instead of the pages' policy, which the CSP middleware
    leaves alone once a response has one)."""
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename) or "attachment"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = ATTACHMENT_CSP
    return response
