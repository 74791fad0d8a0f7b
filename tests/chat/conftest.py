"""Fixtures of the chat tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from channels.layers import channel_layers
from pytest_django import Settings


@pytest.fixture(autouse=True)
def fast_passwords(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fresh_channel_layer() -> Iterator[None]:
    # The in-memory layer's queues belong to the event loop that made them: one per test.
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()
