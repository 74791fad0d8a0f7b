from __future__ import annotations

import pytest
from pytest_django import Settings

from tests.orgs.orgs_support import World, build_world


@pytest.fixture(autouse=True)
def fast_passwords(settings: Settings) -> None:
    """These tests sign many users in: a fast hasher keeps them quick (never in production)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(db: None) -> World:
    return build_world()


@pytest.fixture
def aworld(transactional_db: None) -> World:
    """The same two organisations, committed, for runs executing in the event loop."""
    return build_world()
