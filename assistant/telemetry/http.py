"""An HTTP server span around each request the web server answers (the HTTP semantic conventions), joined to the
caller's trace when the request carries a W3C ``traceparent``: a run that the request starts is its child, so a
client that traces its own calls finds our run, its agents and their model calls under its own span.

``ServerSpans`` wraps the ASGI application (``assistant.asgi``): the span lasts as long as the response, a streamed
one's last event included. ``route`` (a Django middleware) names it by the URL pattern Django resolved
(``POST /v1/chat/completions``, ``POST /c/<uuid:pk>/send``), never by the path's values. No query string, header
or body is recorded. Without telemetry (``setup.current()`` is None) both pass the request through untouched.

OpenTelemetry's own ASGI and Django instrumentations are not on the package index this project installs from;
this is the part of them a run's trace needs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.decorators import sync_and_async_middleware
from opentelemetry import propagate
from opentelemetry import trace as trace_api
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import setup

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})
CARRIED = (b"traceparent", b"tracestate")


class ServerSpans:
    """The ASGI application ``app``, each HTTP request in a ``SERVER`` span under the caller's context."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        telemetry = setup.current()
        if telemetry is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carried = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ()) if k in CARRIED}
        method = str(scope.get("method", "GET"))
        attributes: dict[str, Any] = {
            "http.request.method": method if method in METHODS else "_OTHER",
            "url.path": str(scope.get("path", "")),
            "url.scheme": str(scope.get("scheme", "http")),
            "network.protocol.version": str(scope.get("http_version", "1.1")),
        }
        span = telemetry.tracer.start_span(
            method if method in METHODS else "HTTP",
            context=propagate.extract(carried) if carried else None,
            kind=SpanKind.SERVER,
            attributes=attributes,
        )

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = int(message["status"])
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_attribute("error.type", str(status))
                    span.set_status(Status(StatusCode.ERROR))
            await send(message)

        with trace_api.use_span(span, end_on_exit=True):
            await self.app(scope, receive, sending)


def _named(request: HttpRequest) -> None:
    span = trace_api.get_current_span()
    match = request.resolver_match
    if match is None or not span.is_recording():
        return
    route = "/" + match.route
    span.set_attribute("http.route", route)
    method = request.method or "GET"
    span.update_name(f"{method if method in METHODS else 'HTTP'} {route}")


@sync_and_async_middleware
def route(get_response: Callable[[HttpRequest], Any]) -> Callable[[HttpRequest], Any]:
    """Names the request's server span by its route, once Django has resolved it."""
    if iscoroutinefunction(get_response):

        async def async_middleware(request: HttpRequest) -> HttpResponseBase:
            response: HttpResponseBase = await get_response(request)
            _named(request)
            return response

        return async_middleware

    def middleware(request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase = get_response(request)
        _named(request)
        return response

    return middleware


__all__ = ["ServerSpans", "route"]
