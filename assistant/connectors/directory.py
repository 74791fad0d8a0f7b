"""The connectors of one organisation as the engine looks them up, and the limits every call keeps.

``connector_source`` feeds a run's ``Toolbox``; the limits come from the settings ``CONNECTOR_*``.
"""

from __future__ import annotations

from django.conf import settings

from assistant.engine.connectors import ConnectorConfig, ConnectorLimits, McpConnectors

from .models import Connector


def limits() -> ConnectorLimits:
    return ConnectorLimits(
        allowed_hosts=frozenset(settings.CONNECTOR_ALLOWED_HOSTS),
        timeout=settings.CONNECTOR_TIMEOUT_SECONDS,
        max_chars=settings.CONNECTOR_MAX_CHARS,
    )


class OrgConnectors:
    """An organisation's enabled connectors; another organisation's do not exist here."""

    def __init__(self, organisation_id: int) -> None:
        self.organisation_id = organisation_id

    async def get(self, name: str) -> ConnectorConfig | None:
        connector = await Connector.objects.filter(
            organisation_id=self.organisation_id, name=name, enabled=True
        ).afirst()
        if connector is None or not connector.tool_names:
            return None
        return connector.config()


def connector_source(organisation_id: int) -> McpConnectors:
    return McpConnectors(OrgConnectors(organisation_id), limits())


def offered(organisation_id: int) -> list[Connector]:
    """The connectors a request of this organisation may name: enabled, with at least one picked tool."""
    return [c for c in Connector.objects.filter(organisation_id=organisation_id, enabled=True) if c.tool_names]


def unknown(organisation_id: int, resources: list[str] | tuple[str, ...]) -> str | None:
    """The first ``mcp:<name>`` of ``resources`` this organisation does not offer, by name, or None."""
    names = {c.name for c in offered(organisation_id)}
    for r in resources:
        if r.startswith("mcp:") and r[4:] not in names:
            return r[4:]
    return None
