"""Fixtures of the budget tests (the PostgreSQL hooks are in tests/conftest.py)."""

from __future__ import annotations

import pytest
from pytest_django import Settings

from tests.budgets.budgets_support import World, build_world


@pytest.fixture(autouse=True)
def fast_passwords(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def locmem_email(settings: Settings) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


@pytest.fixture
def world(db: None) -> World:
    return build_world()


@pytest.fixture
def tworld(transactional_db: None) -> World:
    """The same world, committed: for threads and for runs executing in the event loop."""
    return build_world()
