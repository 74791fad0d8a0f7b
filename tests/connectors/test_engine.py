"""The engine's connector tools alone (no Django): names, the header variables, the address guard at
call time, and what a tool not picked or gone becomes."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from assistant.engine.connectors import (
    ConnectorConfig,
    ConnectorError,
    ConnectorLimits,
    McpConnectors,
    PickedTool,
    check_env_name,
    check_header_name,
    list_tools,
    tool_name,
)
from assistant.engine.errors import OutOfScope, ToolError
from assistant.engine.scope import Scope
from assistant.engine.tools import Toolbox
from tests.connectors.mcp_server import CrmServer
from tests.engine.engine_support import STOPPED_WITH_RUN
from tests.waiting import until

SEARCH = PickedTool(
    "search_customers", "Find customers.", {"type": "object", "properties": {"query": {"type": "string"}}}
)


class Directory:
    def __init__(self, *configs: ConnectorConfig) -> None:
        self.configs = {c.name: c for c in configs}

    async def get(self, name: str) -> ConnectorConfig | None:
        return self.configs.get(name)


def _limits(crm: CrmServer, **kwargs: Any) -> ConnectorLimits:
    env = {"CONNECTOR_CRM_TOKEN": "Bearer t", "DJANGO_SECRET_KEY": "secret"}
    defaults: dict[str, Any] = {
        "allowed_hosts": frozenset({urlsplit(crm.url).netloc}),
        "timeout": 5,
        "environ": env.get,
    }
    return ConnectorLimits(**{**defaults, **kwargs})


def test_names_and_variables() -> None:
    assert tool_name("crm", "search.customers v2") == "mcp_crm__search_customers_v2"
    assert len(tool_name("crm", "x" * 100)) == 64
    assert check_env_name("CONNECTOR_CRM_TOKEN") is None
    for name in ("DJANGO_SECRET_KEY", "OPENAI_API_KEY", "connector_lower", "CONNECTOR_", "CONNECTOR_ALLOWED_HOSTS"):
        assert check_env_name(name) is not None
    assert check_header_name("X-Api-Key") is None
    assert check_header_name("Host") is not None and check_header_name("Bad Header") is not None


async def test_a_header_from_another_variable_is_never_read(crm: CrmServer) -> None:
    config = ConnectorConfig(name="crm", url=crm.url, headers=(("Authorization", "DJANGO_SECRET_KEY"),))
    with pytest.raises(ConnectorError, match="only from environment variables named CONNECTOR_"):
        await list_tools(config, _limits(crm))
    assert crm.headers.get("authorization") != "secret"


async def test_only_loaded_connectors_in_scope_get_tools_and_a_private_address_is_refused_at_call_time(
    crm: CrmServer,
) -> None:
    config = ConnectorConfig(
        name="crm", url=crm.url, headers=(("Authorization", "CONNECTOR_CRM_TOKEN"),), tools=(SEARCH,)
    )
    source = McpConnectors(Directory(config), _limits(crm, allowed_hosts=frozenset()))
    toolbox = Toolbox(connectors=source)
    assert await source.load(["crm", "other"]) == ["other"]
    assert toolbox.tools_for(Scope(knowledge_bases=("factures",))) == []
    [tool] = toolbox.tools_for(Scope(connectors=("crm",)))
    assert tool.read_only and tool.spec.name == "mcp_crm__search_customers"
    with pytest.raises(ToolError, match=r"private, loopback or link-local.*CONNECTOR_ALLOWED_HOSTS"):
        await tool.run({"query": "acme"})
    assert crm.calls == []


async def test_a_variable_unset_at_call_time_and_a_tool_gone_are_tool_errors(crm: CrmServer) -> None:
    gone = PickedTool("export_everything")
    config = ConnectorConfig(
        name="crm", url=crm.url, headers=(("Authorization", "CONNECTOR_CRM_TOKEN"),), tools=(SEARCH, gone)
    )
    unset = McpConnectors(Directory(config), _limits(crm, environ={}.get))
    await unset.load(["crm"])
    search, _ = unset.tools(Scope(connectors=("crm",)))
    with pytest.raises(ToolError, match="CONNECTOR_CRM_TOKEN of the header Authorization is not set"):
        await search.run({"query": "acme"})
    source = McpConnectors(Directory(config), _limits(crm))
    await source.load(["crm"])
    _, export = source.tools(Scope(connectors=("crm",)))
    with pytest.raises(
        OutOfScope, match=re.escape("no longer offers 'export_everything'. Return what you found instead.")
    ):
        await export.run({})
    assert crm.calls == []


async def test_stop_cancels_a_call_in_flight_and_closes_its_session(crm: CrmServer) -> None:
    """Stop during a connector call: the call is cancelled (the SDK tells the server, ``notifications/cancelled``),
    its session closed, and the run ends stopped without waiting for the server's answer; the step says why."""
    import asyncio

    from assistant.demo.model import DEMO_MODELS
    from assistant.engine.catalogue import Catalogue
    from assistant.engine.events import Event, ToolResultEvent
    from assistant.engine.loop import run_chat
    from assistant.engine.models.function import CallInfo, FunctionModel
    from assistant.engine.policy import RunRequest
    from assistant.engine.runtime import RunContext
    from assistant.engine.types import Message, ModelRequest, ModelResponse, ToolCall

    catalogue = Catalogue(DEMO_MODELS)
    config = ConnectorConfig(name="crm", url=crm.url, tools=(SEARCH,))
    crm.hold = True  # the server does not answer before Stop, however long it takes

    def main(request: ModelRequest, info: CallInfo) -> ModelResponse:
        assert info.index == 0, "no model call after Stop"
        return ModelResponse(
            tool_calls=[ToolCall(id="c1", name="mcp_crm__search_customers", arguments='{"query": "acme"}')]
        )

    model = FunctionModel(main, catalogue["demo-large"])
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    ctx = RunContext(
        catalogue=catalogue,
        models=lambda _: model,
        toolbox=Toolbox(connectors=McpConnectors(Directory(config), _limits(crm, timeout=60))),
        emit=emit,
    )

    async def stop_once_called() -> None:
        await until(lambda: crm.calls, "the call to reach the server")
        ctx.cancel.cancel()

    stopper = asyncio.ensure_future(stop_once_called())
    outcome = await run_chat(
        RunRequest(messages=(Message.user("Acme?"),), model="demo-large", resources=("mcp:crm",)), ctx
    )
    await stopper
    assert outcome.status == "stopped"
    assert crm.calls == [("search_customers", {"query": "acme"})]
    [result] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.action is not None and result.action.stopped is not None and result.action.started
    assert result.action.stopped == STOPPED_WITH_RUN and not result.ok
    await until(lambda: "notifications/cancelled" in crm.messages, "the server to hear the cancellation")
    await until(lambda: "DELETE" in crm.messages, "the session to be closed")
