"""Chosen documents through the API: ``tools_enabled`` may name ``doc:<slug>/<id>``, checked against the key's
organisation before anything is saved; the main model and its agents then search and read those documents only.

Through HTTP in this process (the ASGI app behind httpx's ASGI transport, the run
executed in the test's event loop); the models are the only fakes (``FunctionModel``s).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import pytest
from asgiref.sync import sync_to_async

from assistant.catalogue import snapshot
from assistant.engine.models.base import Model
from assistant.engine.models.function import CallInfo, FunctionModel
from assistant.engine.notes import without_note
from assistant.engine.types import ModelRequest, ModelResponse, ToolCall
from assistant.knowledge.models import Document, KnowledgeBase
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs.models import Run
from tests.api.api_support import asgi_client

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = [{"role": "user", "content": "What is unpaid on invoice F-2024-077?"}]
ModelFunction = Callable[[ModelRequest, int], ModelResponse]
"""A model's reply to its ``n``-th request of the run (from 0): each call resolves a fresh model."""


def _call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"call_{name}_{len(json.dumps(arguments))}", name=name, arguments=json.dumps(arguments))


def _results(request: ModelRequest, name: str) -> list[dict[str, Any]]:
    return [json.loads(without_note(m.content)) for m in request.messages if m.role == "tool" and m.name == name]


class Models:
    """The main model's and the agents' functions, swapped in for the demo models."""

    main: ModelFunction
    agent: ModelFunction
    requests: dict[str, list[ModelRequest]]

    def __init__(self) -> None:
        self.requests = {"demo-large": [], "demo-small": []}


@pytest.fixture
def models(demo_data: None, fast_demo: None, monkeypatch: pytest.MonkeyPatch) -> Models:
    chosen = Models()
    real = snapshot.resolve

    def resolve(model_id: str) -> Model:
        if model_id in chosen.requests:

            def function(request: ModelRequest, info: CallInfo) -> ModelResponse:
                chosen.requests[model_id].append(request)
                n = len(chosen.requests[model_id]) - 1
                return (chosen.main if model_id == "demo-large" else chosen.agent)(request, n)

            return FunctionModel(function, snapshot.catalogue()[model_id])
        return real(model_id)

    monkeypatch.setattr(snapshot, "resolve", resolve)
    return chosen


@pytest.fixture
async def client(models: Models) -> AsyncIterator[httpx2.AsyncClient]:
    """A plain HTTP client with a key of the demo organisation (the API answers errors in OpenAI's shape)."""
    org = await Organisation.objects.aget(slug="demo")
    _, secret = await sync_to_async(keys.create_key)(org, "chosen documents")
    async with asgi_client(secret) as client:
        yield client


async def _doc(title_part: str, slug: str = "factures", org: str = "demo") -> str:
    row = await Document.objects.aget(
        knowledge_base__organisation__slug=org, knowledge_base__slug=slug, title__contains=title_part
    )
    return row.public_id


async def _other_org() -> None:
    """A second organisation with a base of the same slug as the demo's, and a document in it."""
    other = await Organisation.objects.acreate(name="Other", slug="other")
    kb = await KnowledgeBase.objects.acreate(organisation=other, slug="factures", name="Theirs")
    await Document.objects.acreate(knowledge_base=kb, title="Vault", text="Bimbamjob invoice OBSIDIAN-42.")


async def _post(client: httpx2.AsyncClient, tools_enabled: list[str]) -> httpx2.Response:
    body = {"model": "demo-large", "messages": QUESTION, "tools_enabled": tools_enabled}
    return await client.post("/v1/chat/completions", json=body)


async def test_a_chosen_document_is_all_the_main_model_and_its_agent_can_read(
    client: httpx2.AsyncClient, models: Models
) -> None:
    chosen, other = await _doc("Invoice F-2024-077"), await _doc("Invoice F-2024-112")

    def main(request: ModelRequest, n: int) -> ModelResponse:
        if n == 0:
            return ModelResponse(
                tool_calls=[_call("kb_search", query="Bimbamjob invoice", kb="factures"), _call("kb_read", ids=[other])]
            )
        if n == 1:
            task = {"instruction": "What is unpaid?", "model": "demo-small", "resources": [], "documents": [chosen]}
            return ModelResponse(tool_calls=[_call("agents", tasks=[task])])
        return ModelResponse(text=f"6,250 EUR is unpaid [{chosen}].")

    def agent(request: ModelRequest, n: int) -> ModelResponse:
        if n == 0:
            return ModelResponse(
                tool_calls=[
                    _call("kb_search", query="Bimbamjob invoice", kb="factures"),
                    _call("kb_read", ids=[chosen, other]),
                ]
            )
        findings = json.dumps({"findings": f"6,250 EUR unpaid [{chosen}].", "sources": [chosen]})
        return ModelResponse(tool_calls=[ToolCall(id="call_submit", name="submit_result", arguments=findings)])

    models.main, models.agent = main, agent
    response = await _post(client, [f"doc:factures/{chosen}", "agents"])
    assert response.status_code == 200, response.text
    data = response.json()

    # The main model: its search found only the chosen document; reading another one of the base was refused.
    [search] = _results(models.requests["demo-large"][1], "kb_search")
    assert [h["id"] for h in search["hits"]] == [chosen] and search["count"] == 1
    [read] = _results(models.requests["demo-large"][1], "kb_read")
    assert "outside your scope" in read["error"] and "only read the documents you were given" in read["error"]
    # Its agent, given the document: the same, in its own tools.
    agent_second = models.requests["demo-small"][1]
    [agent_search] = _results(agent_second, "kb_search")
    assert [h["id"] for h in agent_search["hits"]] == [chosen]
    [agent_read] = _results(agent_second, "kb_read")
    assert [d["id"] for d in agent_read["documents"]] == [chosen]
    assert f"{other}: outside your scope" in agent_read["errors"][0]
    assert "F-2024-112" not in json.dumps(agent_read)

    [agent_step] = [s for s in data["steps"] if s["type"] == "run_agent"]
    assert agent_step["agent"]["status"] == "ok"
    assert [s["id"] for s in data["sources"]] == [chosen]  # what the agent read counts as read
    run = await Run.objects.aget(pk=data["run_id"])
    assert run.resources == [f"doc:factures/{chosen}", "agents"]


async def test_a_task_naming_a_document_outside_the_request_is_a_tool_error_for_the_main_model(
    client: httpx2.AsyncClient, models: Models
) -> None:
    chosen, other = await _doc("Invoice F-2024-077"), await _doc("Invoice F-2024-112")
    report = await _doc("kick-off", "comptes-rendus")
    await _other_org()
    elsewhere = await _doc("Vault", "factures", "other")

    def main(request: ModelRequest, n: int) -> ModelResponse:
        if n == 0:
            tasks = [
                {"instruction": "A.", "model": "demo-small", "resources": [], "documents": [other]},
                {"instruction": "B.", "model": "demo-small", "resources": [], "documents": [report]},
                {"instruction": "C.", "model": "demo-small", "resources": [], "documents": ["doc-999999"]},
                {"instruction": "D.", "model": "demo-small", "resources": [], "documents": [elsewhere]},
            ]
            return ModelResponse(tool_calls=[_call("agents", tasks=tasks)])
        return ModelResponse(text="No agent could start.")

    models.main = main
    response = await _post(client, [f"doc:factures/{chosen}", "agents"])
    assert response.status_code == 200, response.text

    [result] = _results(models.requests["demo-large"][1], "agents")
    errors = [t["error"] for t in result["agents"]]
    assert f"Document '{other}' is not part of this request's knowledge bases" in errors[0]
    assert f"Document '{report}' is not part of this request's knowledge bases" in errors[1]
    assert "Document 'doc-999999' does not exist" in errors[2]
    assert f"Document '{elsewhere}' does not exist" in errors[3]  # another organisation's: not even seen
    assert models.requests["demo-small"] == []
    assert not [s for s in response.json()["steps"] if s["type"] == "run_agent"]


async def test_chosen_documents_the_organisation_cannot_hand_on_are_refused_before_anything_is_saved(
    client: httpx2.AsyncClient, models: Models
) -> None:
    await _other_org()
    theirs = await _doc("Vault", "factures", "other")
    report = await _doc("kick-off", "comptes-rendus")
    base = await KnowledgeBase.objects.aget(organisation__slug="demo", slug="factures")
    reading = await Document.objects.acreate(knowledge_base=base, title="Upload", text="", status=Document.PROCESSING)
    failed = await Document.objects.acreate(knowledge_base=base, title="Broken", text="", status=Document.FAILED)
    cases: dict[str, tuple[int, str, str]] = {
        f"doc:factures/{reading.public_id}": (400, "document_not_ready", "is not ready to be read"),
        f"doc:factures/{failed.public_id}": (400, "document_not_ready", "is not ready to be read"),
        "doc:factures/doc-999999": (404, "document_not_found", "'doc:factures/doc-999999' does not exist"),
        f"doc:factures/{theirs}": (404, "document_not_found", f"'doc:factures/{theirs}' does not exist"),
        f"doc:factures/{report}": (404, "document_not_found", f"'doc:factures/{report}' does not exist"),
        "doc:nowhere/doc-1": (404, "document_not_found", "'doc:nowhere/doc-1' does not exist"),
        "doc:factures": (400, "invalid_body", "doc:<slug>/<id>"),
    }
    before = await Run.objects.acount()
    for resource, (status, code, message) in cases.items():
        response = await _post(client, [resource, "agents"])
        assert response.status_code == status, (resource, response.text)
        error = response.json()["error"]
        assert message in error["message"], resource
        assert error["code"] == code and error["param"] == "tools_enabled"
    assert await Run.objects.acount() == before
    assert models.requests == {"demo-large": [], "demo-small": []}
