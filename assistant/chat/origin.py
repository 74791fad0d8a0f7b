"""Which pages may open the live chat's websocket: only this site's own, the same origin as the page.

A browser sends the page's origin (scheme, host and port) with every websocket handshake, and the
session cookie whatever the page: a page of another site, or of another port of the same host (another
service on this machine), must not read a signed-in user's conversations. The handshake is accepted
when its ``Origin`` is exactly the origin the handshake itself was sent to (the ``Host`` header, an
allowed host, with http for ws: and https for wss:, or behind a proxy that ends TLS, the scheme that
``SECURE_PROXY_SSL_HEADER`` says), or one of ``CSRF_TRUSTED_ORIGINS`` (the pages that may post here may
follow a conversation too). Anything else is refused before the consumer runs.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """``(scheme, host, port)`` of ``http(s)://host[:port]`` (a default port filled in), else ``None``."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path or parts.query or parts.username:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


def _headers(scope: dict[str, Any]) -> dict[bytes, str]:
    return {name.lower(): value.decode("latin1") for name, value in scope.get("headers", [])}


def _scheme(scope: dict[str, Any], headers: dict[bytes, str]) -> str:
    proxy: tuple[str, str] | None = settings.SECURE_PROXY_SSL_HEADER
    if proxy is not None:
        # "HTTP_X_FORWARDED_PROTO" is the WSGI name of the x-forwarded-proto header.
        name = proxy[0].removeprefix("HTTP_").lower().replace("_", "-").encode()
        if headers.get(name, "").split(",")[0].strip() == proxy[1]:
            return "https"
    return "https" if scope.get("scheme") == "wss" else "http"


def own_origin(scope: dict[str, Any]) -> Origin | None:
    """The origin the handshake was sent to, from its ``Host`` header, if that host is allowed."""
    headers = _headers(scope)
    host = headers.get(b"host", "")
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    return parse_origin(f"{_scheme(scope, headers)}://{host}")


def _trusted(origin: Origin, pattern: str) -> bool:
    """``pattern`` is one of ``CSRF_TRUSTED_ORIGINS``: an origin, or ``https://*.example.com``."""
    wildcard = "://*." in pattern
    trusted = parse_origin(pattern.replace("://*.", "://", 1))
    if trusted is None or (origin[0], origin[2]) != (trusted[0], trusted[2]):
        return False
    return origin[1] == trusted[1] or (wildcard and origin[1].endswith("." + trusted[1]))


def allowed(scope: dict[str, Any]) -> bool:
    headers = _headers(scope)
    origin = parse_origin(headers.get(b"origin", ""))
    if origin is None:
        return False
    if origin == own_origin(scope):
        return True
    return any(_trusted(origin, pattern) for pattern in settings.CSRF_TRUSTED_ORIGINS)


class SameOriginValidator:
    """ASGI middleware for websockets: refuses the handshake (HTTP 403) unless ``allowed(scope)``."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not allowed(scope):
            return await WebsocketDenier()(scope, receive, send)  # type: ignore[arg-type]  # Channels' stubs type an ASGI scope as a TypedDict; this middleware passes it on as it came
        return await self.application(scope, receive, send)
