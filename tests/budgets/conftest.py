"""Fixtures of the budget tests (the PostgreSQL hooks are in tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.utils import translation

from assistant.runs import intake
from assistant.runs.start import RunStart
from tests.budgets.budgets_support import Admissions, World, build_world


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def locmem_email(settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


@pytest.fixture
def world(db: None) -> World:
    return build_world()


@pytest.fixture
def tworld(transactional_db: None) -> World:
    """The same world, committed: for threads and for runs executing in the event loop."""
    return build_world()


@pytest.fixture
async def member_client(tworld: World) -> AsyncClient:
    """The page's client, signed in as the committed world's member (``tworld``)."""
    client = AsyncClient()
    await client.aforce_login(tworld.member)
    return client


@pytest.fixture
def twenty_admissions(tworld: World) -> Admissions:
    """Twenty runs of ``ask`` for the member, asked one after the other (SQLite; tests/api sends twenty at once to
    the live server): the runs created, and the refusals of the type given (any other refusal fails the test)."""

    async def admit(ask: intake.Ask, refusal: type[Exception]) -> tuple[list[RunStart], list[Exception]]:
        def attempt() -> RunStart | Exception:
            try:
                with translation.override("en"):
                    return intake.create_run(tworld.member, tworld.demo, None, ask)
            except refusal as e:
                return e

        attempts = [await sync_to_async(attempt)() for _ in range(20)]
        created = [a for a in attempts if isinstance(a, RunStart)]
        refused = [a for a in attempts if not isinstance(a, RunStart)]
        return created, refused

    return admit
