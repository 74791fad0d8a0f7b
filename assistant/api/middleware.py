"""Bodies over the limit and Django's own error pages, answered in the caller's format.

A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (``MAX_REQUEST_BODY_MB``; uploaded files excepted: a
knowledge base has its own limit) makes Django raise ``RequestDataTooBig`` wherever the body is
first read (the CSRF check, a view), which ends as an error page. It is refused here first: under
``/v1/`` with OpenAI's error shape and 413, on a page with 413 and an HTML fragment that htmx puts
at the top of the form that sent it (the message typed stays), or a short page without htmx. A form
with more fields than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` is refused the same way (400).

A body the server itself refused (over a knowledge base's upload limits, ``assistant/server``) arrives empty with
the ``Body-Refused`` header: it is answered here the same way, an upload's form saying its limits.

Under ``/v1/`` a 404 or 405 that Django or django-ninja answers itself (an unknown path, a wrong
method) becomes OpenAI's error shape too, and every response carries ``x-request-id`` (``req_`` and 32 hex
digits, as OpenAI's), made here for the request (``request_id``) and logged with its method, path and status, so
that a client can quote it and an operator find it.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.http.multipartparser import MultiPartParserError
from django.template.loader import render_to_string
from django.utils.decorators import sync_and_async_middleware
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from assistant.server.server import BODY_REFUSED

from .errors import ApiError, error_response

log = logging.getLogger(__name__)

API_PREFIX = "/v1/"
BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
REQUEST_ID = "assistant.request_id"
"""Where the API request's id is kept in ``request.META`` (made by this middleware, never taken from the client)."""


def request_id(request: HttpRequest) -> str:
    """The id of an API request (its ``x-request-id``), made by ``request_limits``; empty outside ``/v1/``."""
    return str(request.META.get(REQUEST_ID, ""))


def _identified(request: HttpRequest) -> None:
    if request.path.startswith(API_PREFIX):
        request.META[REQUEST_ID] = f"req_{uuid.uuid4().hex}"


def _said(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    """The response with its request's id, logged."""
    rid = request_id(request)
    if rid:
        response["x-request-id"] = rid
        log.info("%s %s %s request %s", request.method, request.path, response.status_code, rid)
    return response


def _limit_mb() -> float:
    return (settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0) / 1024 / 1024


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """The response refusing a body over the limit (or a form with too many fields), or None."""
    if request.method not in BODY_METHODS:
        return None
    if BODY_REFUSED.decode() in request.headers:
        return _upload_too_big(request) if request.content_type == "multipart/form-data" else _too_big(request)
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        if request.content_type == "multipart/form-data":
            # Files go to disk and do not count (a knowledge base has its own limit); the other fields do.
            request.POST  # noqa: B018 - parsed here as the CSRF check would, so that a refusal is answered here
        else:
            body = request.body
            if limit is not None and len(body) > limit:  # a body sent without Content-Length
                raise RequestDataTooBig
            if request.content_type == "application/x-www-form-urlencoded":
                request.POST  # noqa: B018 - parsed here, so that too many fields is refused here
    except RequestDataTooBig:
        return _too_big(request)
    except TooManyFilesSent:
        return _upload_too_big(request)
    except TooManyFieldsSent:
        return _page_error(request, _("This form has too many fields."), 400)
    except MultiPartParserError:
        return _page_error(request, _("This form could not be read; send it again."), 400)
    return None


def _too_big(request: HttpRequest) -> HttpResponse:
    limit = f"{_limit_mb():.3g}"
    if request.path.startswith(API_PREFIX):
        message = f"The request body is over the limit of {limit} MB (MAX_REQUEST_BODY_MB)."
        return error_response(ApiError(413, "body_too_large", message))
    return _page_error(request, _("This is too long to send: the limit is %(limit)s MB.") % {"limit": limit}, 413)


def _upload_too_big(request: HttpRequest) -> HttpResponse:
    """A form with too many files, or files over the limit (refused by the server as they arrived): none was kept."""
    if request.path.startswith(API_PREFIX):
        return _too_big(request)
    message = _("Nothing was added: send at most %(count)d files at once, each of at most %(limit)g MB.") % {
        "limit": settings.KB_MAX_UPLOAD_MB,
        "count": settings.KB_MAX_UPLOAD_FILES,
    }
    return _page_error(request, message, 413)


def _page_error(request: HttpRequest, message: str, status: int) -> HttpResponse:
    if request.headers.get("HX-Request") == "true":
        # At the top of the form that sent it, which stays as it was.
        response = HttpResponse(render_to_string("_form_error.html", {"message": message}), status=status)
        response["HX-Retarget"] = "this"
        response["HX-Reswap"] = "afterbegin"
        return response
    return HttpResponse(
        render_to_string("_form_error_page.html", {"message": message, "language": get_language()}), status=status
    )


def _in_api_shape(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    if not request.path.startswith(API_PREFIX) or response.status_code not in (404, 405):
        return response
    if str(response.get("Content-Type", "")).startswith("application/json"):
        try:
            if "error" in json.loads(response.content):  # type: ignore[attr-defined]  # HttpResponseBase has no content in the stubs; this middleware only sees HttpResponse here
                return response
        except ValueError:
            pass
    if response.status_code == 405:
        allowed = str(response.get("Allow", ""))
        error = ApiError(
            405,
            "method_not_allowed",
            f"{request.method} is not allowed on {request.path}; allowed: {allowed or 'none'}.",
        )
        refused = error_response(error)
        if allowed:
            refused["Allow"] = allowed
        return refused
    return error_response(ApiError(404, "not_found", f"No endpoint {request.path}."))


@sync_and_async_middleware
def request_limits(get_response: Callable[[HttpRequest], Any]) -> Callable[[HttpRequest], Any]:
    if iscoroutinefunction(get_response):

        async def async_middleware(request: HttpRequest) -> HttpResponseBase:
            _identified(request)
            if request.content_type == "multipart/form-data":
                # Files (up to KB_MAX_UPLOAD_FILES of KB_MAX_UPLOAD_MB): parsed in the request's thread, not in the
                # event loop's, which serves every other request meanwhile.
                refused = await sync_to_async(_refusal)(request)
            else:
                refused = _refusal(request)
            if refused is not None:
                return _said(request, refused)
            response: HttpResponseBase = await get_response(request)
            return _said(request, _in_api_shape(request, response))

        return async_middleware

    def middleware(request: HttpRequest) -> HttpResponseBase:
        _identified(request)
        refused = _refusal(request)
        if refused is not None:
            return _said(request, refused)
        return _said(request, _in_api_shape(request, get_response(request)))

    return middleware


__all__ = ["request_id", "request_limits"]
