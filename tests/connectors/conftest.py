"""Fixtures of the connector tests: a local MCP server (``crm``), allowed for the test, and its token."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from pytest_django import Settings

from tests.connectors.connectors_support import TOKEN
from tests.connectors.mcp_server import CrmServer, crm_server


@pytest.fixture(autouse=True)
def fast_passwords(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def crm_session() -> Iterator[CrmServer]:
    with crm_server() as server:
        yield server


@pytest.fixture
def crm(crm_session: CrmServer) -> Iterator[CrmServer]:
    crm_session.calls.clear()
    crm_session.messages.clear()
    crm_session.reply = None
    crm_session.hold = False
    yield crm_session
    crm_session.reply = None
    crm_session.hold = False


@pytest.fixture
def crm_allowed(crm: CrmServer, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> CrmServer:
    """The test server's host and port listed in CONNECTOR_ALLOWED_HOSTS, and its token in CONNECTOR_CRM_TOKEN."""
    settings.CONNECTOR_ALLOWED_HOSTS = [urlsplit(crm.url).netloc]
    monkeypatch.setenv("CONNECTOR_CRM_TOKEN", TOKEN)
    return crm
