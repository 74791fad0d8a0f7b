"""The project's ASGI application behind httpx2's ``ASGITransport``, typed as httpx2 types an app.

Channels types ``ProtocolTypeRouter.__call__`` with its own scope TypedDicts, httpx2 an app with plain mappings: at
runtime both are ASGI 3, so the cast is said once, here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias, cast

import httpx2

from assistant.asgi import application

Message: TypeAlias = MutableMapping[str, Any]
ASGIApp: TypeAlias = Callable[
    [Message, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


def asgi_transport() -> httpx2.ASGITransport:
    """A transport that calls the application in this process (no server, no socket)."""
    return httpx2.ASGITransport(app=cast(ASGIApp, application))
