"""Telemetry tests: this process's telemetry over the SDK's in-memory exporters (``telemetry_support``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from channels.layers import channel_layers

from assistant.telemetry import setup
from assistant.telemetry.content import ContentMode
from tests.telemetry.telemetry_support import Exported, exported_with


@pytest.fixture
def exported(request: pytest.FixtureRequest) -> Iterator[Exported]:
    """This process's telemetry, over in-memory exporters (the content mode by the test's parameter, none by
    default)."""
    found = exported_with(getattr(request, "param", ContentMode.NO_CONTENT))
    previous = setup.install(found.telemetry)
    yield found
    setup.install(previous)


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> Iterator[None]:
    # The in-memory layer's queues belong to the event loop that made them: one per test.
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()
