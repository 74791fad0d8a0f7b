"""Fixtures: a wire server per dialect (``server`` is parametrised indirectly) and a provider for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.providers.provider_support import Wire, make_provider
from tests.providers.wire import Dialect, WireServer


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[WireServer]:
    dialect: Dialect = request.param
    srv = WireServer(dialect).start()
    yield srv
    srv.stop()


@pytest.fixture
async def wire(server: WireServer) -> AsyncIterator[Wire]:
    provider = make_provider(server.dialect, server)
    yield Wire(server.dialect, server, provider)
    await provider.aclose()
