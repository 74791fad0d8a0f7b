"""Connectors on the chat page: the composer offers ``mcp:crm`` under the connector's name, a message
sent with it runs an agent over the connector, and the panel shows the connector's action as text.
The models are the only fakes; the MCP server is the SDK's, local."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from assistant.catalogue import snapshot
from assistant.engine.models.base import Model
from assistant.engine.models.function import FunctionModel
from assistant.engine.types import ModelRequest, ModelResponse
from assistant.runs import execution
from assistant.runs.models import Run
from tests.connectors.connectors_support import register
from tests.connectors.mcp_server import CrmServer
from tests.connectors.test_connector_runs import SEARCH, _agent_reports
from tests.orgs.orgs_support import World, build_world, call, scripted, signed_in

pytestmark = pytest.mark.django_db(transaction=True)

INJECTED = '<img src=x onerror="alert(1)">'


@pytest.fixture
def world(transactional_db: None) -> World:
    return build_world()


def test_the_composer_offers_an_enabled_connector_with_tools_only(world: World, crm_allowed: CrmServer) -> None:
    admin = signed_in("demo")
    assert 'value="mcp:crm"' not in admin.get("/").content.decode()
    register(admin, crm_allowed, description="Our customers")
    page = admin.get("/").content.decode()
    assert '<label title="Our customers"><input type="checkbox" name="resources" value="mcp:crm"> crm' in page
    # Another organisation's users are not offered it.
    assert 'value="mcp:crm"' not in signed_in("mallory").get("/").content.decode()
    # Disabled, it is neither offered nor accepted.
    from assistant.connectors.models import Connector

    Connector.objects.update(enabled=False)
    assert 'value="mcp:crm"' not in admin.get("/").content.decode()
    ask = {"text": "Acme?", "model": "demo-large", "level": "approfondi", "resources": ["mcp:crm", "agents"]}
    response = admin.post("/c/new", ask, headers={"HX-Request": "true"})
    assert "The connector &#x27;crm&#x27; does not exist or you may not use it." in response.content.decode()
    assert not Run.objects.exists()


async def test_a_message_sent_with_a_connector_runs_an_agent_over_it(
    world: World, crm_allowed: CrmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await sync_to_async(lambda: register(signed_in("demo"), crm_allowed))()).status_code == 302

    def delegate(request: ModelRequest) -> ModelResponse:
        task = {"instruction": "Where is Acme?", "model": "demo-small", "resources": ["mcp:crm"]}
        return ModelResponse(tool_calls=[call("agents", tasks=[task])])

    functions: dict[str, Any] = {
        "demo-large": scripted(delegate, ModelResponse(text="Acme SA is in Lyon.")),
        "demo-small": scripted(ModelResponse(tool_calls=[call(SEARCH, query=INJECTED)]), _agent_reports),
    }
    made = {m: FunctionModel(fn, (await sync_to_async(snapshot.catalogue)())[m]) for m, fn in functions.items()}

    def resolve(model_id: str) -> Model:
        return made[model_id]

    monkeypatch.setattr(snapshot, "resolve", resolve)
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    ask = {"text": "Where is Acme?", "model": "demo-large", "level": "approfondi", "resources": ["mcp:crm", "agents"]}
    response = await client.post("/c/new", ask, headers={"HX-Request": "true"})
    assert response.status_code == 200
    run = await Run.objects.aget()
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.status == "ok" and run.resources == ["mcp:crm", "agents"]
    assert crm_allowed.calls == [("search_customers", {"query": INJECTED})]
    steps = [s async for s in run.steps.order_by("seq")]
    actions = [s.data["action"] for s in steps if s.kind == "agent_action"]
    assert actions[0]["tool"] == SEARCH and actions[0]["label"].startswith("crm · search_customers ")
    assert any(s.kind == "agent_started" and s.data["resources"] == ["mcp:crm"] for s in steps)

    page = (await client.get(f"/c/{run.conversation_id}/")).content.decode()
    assert "Acme SA is in Lyon." in page
    assert "crm · search_customers" in page
    assert INJECTED not in page  # the arguments show as text, never as markup
    assert "&lt;img src=x onerror=" in page
