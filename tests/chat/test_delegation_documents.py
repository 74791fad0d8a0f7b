"""A delegation given chosen documents, as the signed-in user sees it: the line's resources are their titles.

The run goes through the composer's path (``/c/new``) and the page renders it from its saved steps; the models
are the only fakes (``FunctionModel``s in place of the demo models).
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.test import AsyncClient

from assistant.catalogue import snapshot
from assistant.engine.models.base import Model
from assistant.engine.models.function import CallInfo, FunctionModel
from assistant.engine.types import ModelRequest, ModelResponse, ToolCall
from assistant.knowledge.models import Document
from assistant.runs import execution
from assistant.runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_delegation_line_shows_the_chosen_documents_titles(
    fast_demo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    doc = await Document.objects.aget(knowledge_base__slug="factures", title="Invoice F-2024-077 — Bimbamjob")
    calls = {"demo-large": 0, "demo-small": 0}

    def main(request: ModelRequest, info: CallInfo) -> ModelResponse:
        calls["demo-large"] += 1
        if calls["demo-large"] == 1:
            task = {"instruction": "Check it.", "model": "demo-small", "resources": [], "documents": [doc.public_id]}
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="agents", arguments=json.dumps({"tasks": [task]}))])
        return ModelResponse(text="Done.")

    def agent(request: ModelRequest, info: CallInfo) -> ModelResponse:
        calls["demo-small"] += 1
        report = json.dumps({"findings": f"Unpaid [{doc.public_id}].", "sources": [doc.public_id]})
        return ModelResponse(tool_calls=[ToolCall(id="c2", name="submit_result", arguments=report)])

    def resolve(model_id: str) -> Model:
        return FunctionModel(main if model_id == "demo-large" else agent, snapshot.catalogue()[model_id])

    monkeypatch.setattr(snapshot, "resolve", resolve)
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    ask = {"text": "Invoice?", "model": "demo-large", "level": "approfondi", "resources": ["kb:factures", "agents"]}
    response = await client.post("/c/new", ask)
    assert response.status_code == 302
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    await execution.wait_for(run.pk)

    page = (await client.get(f"/c/{run.conversation_id}/")).content.decode()
    resources = page.split("Resources received</dt><dd>")[1].split("</dd>")[0]
    assert resources == "“Invoice F-2024-077 — Bimbamjob” (Invoices)"  # the base by its name
    assert "doc:factures/" not in resources
