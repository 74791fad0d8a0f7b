"""Connectors: MCP servers an organisation's admins registered, offered to runs as ``mcp:<name>``.

What is stored is where the server is, the names of the environment variables its headers come from
(never their values) and the tools the admin picked, with their description and input schema as the
server listed them when picked.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from assistant.engine.connectors import ConnectorConfig, PickedTool
from assistant.orgs.models import Organisation


class Connector(models.Model):
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="connectors")
    name = models.SlugField(max_length=40)
    description = models.CharField(max_length=300, blank=True)
    url = models.CharField(max_length=500)
    headers = models.JSONField(default=list, blank=True)
    """``[{"header": "Authorization", "env": "CONNECTOR_CRM_TOKEN"}, ...]``: names only, never values."""
    tools = models.JSONField(default=list, blank=True)
    """The picked tools: ``[{"name", "description", "input_schema"}, ...]``, all read-only when picked."""
    enabled = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organisation", "name"], name="connector_name_per_org")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def resource(self) -> str:
        return f"mcp:{self.name}"

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("name", "")) for t in self.tools if isinstance(t, dict)]

    def header_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((str(h.get("header", "")), str(h.get("env", ""))) for h in self.headers if isinstance(h, dict))

    def config(self) -> ConnectorConfig:
        """The engine's view of this connector."""
        tools: list[PickedTool] = []
        for t in self.tools:
            if isinstance(t, dict) and t.get("name"):
                schema: Any = t.get("input_schema")
                tools.append(
                    PickedTool(
                        name=str(t["name"]),
                        description=str(t.get("description") or ""),
                        input_schema=schema if isinstance(schema, dict) else {},
                    )
                )
        return ConnectorConfig(
            name=self.name,
            url=self.url,
            headers=self.header_pairs(),
            tools=tuple(tools),
            description=self.description,
        )
