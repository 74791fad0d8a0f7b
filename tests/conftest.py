"""Fixtures and hooks for the whole suite.

PostgreSQL tests (marker ``postgres``) run in ``make test``'s PostgreSQL pytest runs, with
DATABASE_URL. A run on SQLite deselects them and says so at the end; a run on PostgreSQL that cannot
reach the server fails. Nothing is skipped silently.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Generator
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.core.cache import cache
from django.core.management import call_command
from django.core.signals import request_finished
from django.db import connections
from django.test import RequestFactory, override_settings
from django.test.client import ClientMixin
from django.utils import translation
from pytest_django import Settings

_deselected: list[pytest.Item] = []

_login, _alogin = ClientMixin.login, ClientMixin.alogin


def _login_with_a_request(self: ClientMixin, **credentials: Any) -> bool:
    """``login`` as the sign-in page authenticates: with the request, which django-axes needs to count the
    attempt by address (it refuses an ``authenticate`` without one)."""
    credentials.setdefault("request", RequestFactory().post("/login/"))
    return bool(_login(self, **credentials))


async def _alogin_with_a_request(self: ClientMixin, **credentials: Any) -> bool:
    credentials.setdefault("request", RequestFactory().post("/login/"))
    return bool(await _alogin(self, **credentials))


ClientMixin.login = _login_with_a_request  # type: ignore[method-assign]  # every test client signs in with a request
ClientMixin.alogin = _alogin_with_a_request  # type: ignore[method-assign]  # every test client signs in with a request


def on_postgresql() -> bool:
    return "postgresql" in str(settings.DATABASES["default"]["ENGINE"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if on_postgresql():
        return
    pg = [i for i in items if i.get_closest_marker("postgres") is not None]
    if pg:
        _deselected.extend(pg)
        config.hook.pytest_deselected(items=pg)
        items[:] = [i for i in items if i.get_closest_marker("postgres") is None]


def background_db_work_done(**_: object) -> None:
    """Wait until asgiref's single thread executor has run every call handed to it so far.

    Async code outside a request's ``async_to_sync`` (a run, a consumer) runs its ``sync_to_async``
    calls in that one thread, on its own connection to the test database. A task cancelled by the
    close of its event loop stops awaiting its call, but the call goes on there: a run launched by an
    async view that the sync test ``Client`` called (the request's loop closes at once and cancels
    it while its lease claim is under way), a task left when pytest-asyncio closes a test's loop.
    A write still going on in that thread would hold SQLite's lock while the main thread's next statement
    (often the next test's flush or setup) runs, or land in the next test's data. So the main thread
    waits for that thread between requests and between tests.
    """
    if threading.current_thread() is not threading.main_thread():
        return  # that thread itself (an AsyncClient's request), or another one: nothing to wait for here
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        SyncToAsync.single_thread_executor.submit(lambda: None).result(timeout=60)
    # else: an event loop runs in this thread, which a call in that thread may be waiting for


# After each sync test Client request (response.close() sends it), in the main thread.
request_finished.connect(background_db_work_done, dispatch_uid="tests.background_db_work_done")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    background_db_work_done()  # before the test's fixtures end (its database flushed or rolled back)
    try:
        return (yield)
    finally:
        background_db_work_done()  # before the next test's setup


def pytest_fixture_post_finalizer(fixturedef: Any, request: Any) -> None:
    background_db_work_done()  # e.g. after pytest-asyncio closed a test's event loop, cancelling what was left


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _deselected:
        terminalreporter.write_line(
            f"{len(_deselected)} PostgreSQL tests deselected: this run uses SQLite. `make test` runs them with "
            "DATABASE_URL=postgres://postgres@127.0.0.1:5432/test (and Redis and Celery workers for tests/scale).",
            yellow=True,
        )


@pytest.fixture(autouse=True)
def _fresh_cache() -> Generator[None, None, None]:
    """Every test starts with an empty cache: the API's request and failed-key counters live there
    (django-axes' failed sign-ins are in the database, rolled back or flushed after each test)."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _default_language() -> Generator[None, None, None]:
    """Every test starts in the site's language (``LANGUAGE_CODE``), whatever the test before it asked for.

    Django's ``LocaleMiddleware`` activates the request's language and nothing deactivates it after the
    response: a server's next request activates its own, and under ASGI each request's language lives in its
    own task. The sync test ``Client`` runs the middleware in the test's thread, so a test whose last request
    chose French (``/i18n/setlang/``, an ``Accept-Language``) left French active in that thread, and a later
    test rendering a template without a request of its own was worded in French."""
    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(scope="session", autouse=True)
def _stored_files(tmp_path_factory: pytest.TempPathFactory) -> Generator[None, None, None]:
    """Stored files (the demo data's table, uploads) go to a folder of the session, never into the checkout."""
    with override_settings(MEDIA_ROOT=tmp_path_factory.mktemp("media")):
        yield


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db = settings.DATABASES["default"]
    if on_postgresql():
        # Developers share one PostgreSQL: each pytest process gets its own test database.
        db.setdefault("TEST", {})["NAME"] = f"test_{db['NAME']}_{os.getpid()}"
    else:
        # A file, as `make run` has, not Django's default shared-cache in-memory database: there a write of one
        # thread (the extraction pool, asgiref's thread) fails at once with "database table is locked" while
        # another holds the table, where a file waits (WAL, the busy timeout of settings.py) as a server does.
        db.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("db") / "test.sqlite3")


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Generator[None, None, None]:
    """pytest-django's test databases; before they are destroyed, the connection of asgiref's single thread
    executor is closed.

    That thread lives for the process: async code outside a request (a run, a follower) runs its
    ``sync_to_async`` calls there, on a connection of its own that nothing closes after a call (Django closes a
    request's connection when the request ends, in the request's thread). On PostgreSQL it is a connection
    taken from the pool (``DB_POOL_*``); destroying the test database closes the main thread's connection and
    the pool's idle ones, not the one that thread still holds, and ``DROP DATABASE`` then fails with
    "database is being accessed by other users". Closing it returns it to the pool, which then closes it.
    (On SQLite the close just closes that thread's connection to the test database's file.)"""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=60)


@pytest.fixture
def demo_data(db: None) -> None:
    """The demo organisation, user and knowledge bases, as `make run` loads them."""
    call_command("load_demo", verbosity=0)


@pytest.fixture
def fast_demo(settings: Settings) -> None:
    """The demo model at full speed."""
    settings.DEMO_PACE = 0.0
    settings.DEMO_LATENCY = 0.0
