"""Registering the test server as a connector, as an admin does on the page."""

from __future__ import annotations

from typing import Any

from django.test import Client

from tests.connectors.mcp_server import CrmServer

TOKEN = "Bearer crm-secret-7f3a"
"""The value of CONNECTOR_CRM_TOKEN in the tests: it must reach the server and never be stored or shown."""


def register(client: Client, crm: CrmServer, **fields: Any) -> Any:
    data = {
        "name": "crm",
        "description": "Customers",
        "url": crm.url,
        "headers_text": "Authorization: CONNECTOR_CRM_TOKEN",
        "enabled": "on",
        **fields,
    }
    return client.post("/settings/connectors/new", data)
