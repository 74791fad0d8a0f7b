"""The middleware whose hooks run in the event loop's thread (``orgs.middleware``) behave as Django's do, over ASGI."""

from __future__ import annotations

import inspect
import re

import httpx2
import pytest
from django.conf import settings
from django.utils.deprecation import MiddlewareMixin
from django.utils.module_loading import import_string

from tests.asgi_app import asgi_transport

pytestmark = pytest.mark.django_db(transaction=True)


def test_no_middleware_sends_its_hooks_to_a_thread() -> None:
    """Each ``MiddlewareMixin`` of the stack has the loop-thread ``__acall__`` (and ``process_view``): one added
    without ``inline`` would cost every request its trips to a thread again."""
    for path in settings.MIDDLEWARE:
        middleware = import_string(path)
        if not (isinstance(middleware, type) and issubclass(middleware, MiddlewareMixin)):
            continue
        acall = middleware.__acall__
        assert acall is not MiddlewareMixin.__acall__, path
        if hasattr(middleware, "process_view"):
            assert inspect.iscoroutinefunction(middleware.process_view), path


def _client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=asgi_transport(), base_url="http://localhost")


def _token(page: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


async def test_signing_in_over_asgi_saves_the_session_and_the_next_page_knows_the_user(demo_data: None) -> None:
    async with _client() as client:
        login = await client.get("/login/")
        assert login.status_code == 200
        assert login.headers["x-content-type-options"] == "nosniff"  # SecurityMiddleware
        assert login.headers["x-frame-options"] == "DENY"  # XFrameOptionsMiddleware
        assert "default-src" in login.headers["content-security-policy"]  # CSPMiddleware
        refused = await client.post("/login/", data={"username": "demo", "password": "demo-password"})
        assert refused.status_code == 403  # CsrfViewMiddleware: no token
        signed_in = await client.post(
            "/login/",
            data={"username": "demo", "password": "demo-password", "csrfmiddlewaretoken": _token(login.text)},
        )
        assert signed_in.status_code == 302, signed_in.text[:500]
        assert "sessionid" in client.cookies  # the modified session was saved (in a thread) and its cookie set
        home = await client.get("/")
        assert home.status_code == 200 and "demo" in home.text  # AuthenticationMiddleware: the session's user


async def test_the_page_speaks_the_language_the_browser_asks_for(demo_data: None) -> None:
    async with _client() as client:
        french = await client.get("/login/", headers={"Accept-Language": "fr"})
        english = await client.get("/login/", headers={"Accept-Language": "en"})
    assert 'lang="fr"' in french.text and 'lang="en"' in english.text  # LocaleMiddleware
    assert "Accept-Language" in french.headers.get("vary", "")
