"""ASGI entry point: HTTP through Django; websockets (the live chat) through Channels, signed in by
the session cookie and only from this site's own pages (the Origin must be the page's own scheme, host and
port, or one of CSRF_TRUSTED_ORIGINS: assistant/chat/origin.py)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "assistant.settings")
django_asgi_app = get_asgi_application()

from assistant.telemetry import setup as telemetry  # noqa: E402

telemetry.configure()  # with OTEL_EXPORTER_OTLP_ENDPOINT: traces and metrics out (docs/OBSERVABILITY.md)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from assistant.chat.origin import SameOriginValidator  # noqa: E402
from assistant.chat.routing import websocket_urlpatterns  # noqa: E402
from assistant.telemetry.http import ServerSpans  # noqa: E402

application = ProtocolTypeRouter(
    {
        # With telemetry, each request in a server span joined to the caller's trace (``traceparent``).
        "http": ServerSpans(django_asgi_app),
        # The routes come from Django's path(), typed URLPattern; Channels' stubs want their own extended
        # pattern, which no public function returns.
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),  # type: ignore[arg-type]  # Django's path() returns URLPattern; Channels' stubs want their own pattern
    }
)
