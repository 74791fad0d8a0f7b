"""Registering the test server as a connector, as an admin does on the page."""

from __future__ import annotations

from typing import Any

from django.test import Client
from mcp_server import CrmServer


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
