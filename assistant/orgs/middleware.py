"""Django's and django-csp's middleware, run in the event loop's thread rather than a thread each hook.

Under ASGI, a ``MiddlewareMixin`` middleware hands each of its hooks (``process_request``, ``process_view``,
``process_response``) to a thread with ``sync_to_async``, in case it does blocking I/O: with the project's ten,
about twenty trips to a thread and back for every request, each costing about a tenth of a millisecond of CPU,
on every API call and every page. The hooks of the middleware below do no I/O: they read the request's headers
and cookies, set lazy attributes (the session, the user, the messages: read from the database, later, by
whoever uses them, in a view's thread), and write the response's headers and cookies. ``inline`` gives each an
``__acall__`` and a ``process_view`` that run those same hooks in the event loop's thread, unchanged; under WSGI
or a sync stack nothing changes. The one hook that may write to the database, the session's ``process_response``
when the session was modified (a sign-in, a language chosen, a message stored), still goes to a thread.
"""

from __future__ import annotations

from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from csp import middleware as csp
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.middleware import clickjacking, common, csrf, locale, security
from django.utils.deprecation import MiddlewareMixin

M = TypeVar("M", bound=type[MiddlewareMixin])


def inline(cls: M) -> M:
    """A subclass of ``cls`` whose hooks run in the event loop's thread when the stack is async."""

    async def __acall__(self: Any, request: HttpRequest) -> HttpResponseBase:
        response = self.process_request(request) if hasattr(self, "process_request") else None
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            response = await self.aprocess_response(request, response)
        result: HttpResponseBase = response
        return result

    async def aprocess_response(self: Any, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        result: HttpResponseBase = self.process_response(request, response)
        return result

    namespace: dict[str, Any] = {
        "__acall__": __acall__,  # what ``MiddlewareMixin.__call__`` calls in an async stack
        "aprocess_response": aprocess_response,
        "__module__": __name__,
        "__doc__": f"{cls.__module__}.{cls.__qualname__}, its hooks run in the event loop's thread.",
    }
    if hasattr(cls, "process_view"):
        sync_view = cls.process_view

        async def process_view(self: Any, request: HttpRequest, *args: Any) -> HttpResponseBase | None:
            result: HttpResponseBase | None = sync_view(self, request, *args)
            return result

        namespace["process_view"] = process_view  # a coroutine function: Django's handler awaits it, no thread
    return type(cls.__name__, (cls,), namespace)  # type: ignore[return-value]  # type() makes a subclass of cls, which mypy cannot see


SecurityMiddleware = inline(security.SecurityMiddleware)
CSPMiddleware = inline(csp.CSPMiddleware)
LocaleMiddleware = inline(locale.LocaleMiddleware)
CommonMiddleware = inline(common.CommonMiddleware)
CsrfViewMiddleware = inline(csrf.CsrfViewMiddleware)
AuthenticationMiddleware = inline(auth.AuthenticationMiddleware)
MessageMiddleware = inline(messages.MessageMiddleware)
XFrameOptionsMiddleware = inline(clickjacking.XFrameOptionsMiddleware)


class SessionMiddleware(inline(sessions.SessionMiddleware)):  # type: ignore[misc]  # the base class is made at runtime by inline(), which mypy cannot follow
    """Django's, its hooks in the event loop's thread, except a response's whose session must be saved."""

    async def aprocess_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        session = getattr(request, "session", None)
        if session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST):
            saved: HttpResponseBase = await sync_to_async(self.process_response, thread_sensitive=True)(
                request, response
            )
            return saved
        result: HttpResponseBase = await super().aprocess_response(request, response)
        return result
