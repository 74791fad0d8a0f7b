"""No user reaches another organisation's objects: guessing an id gives 404, and runs read only their own documents."""

from __future__ import annotations

import json

import pytest
from django.test import AsyncClient

from assistant.engine.types import ModelRequest, ModelResponse
from assistant.knowledge.backend import OrgKnowledge
from assistant.knowledge.models import Document
from assistant.orgs.models import AgentProfile, Organisation
from assistant.runs import execution
from assistant.runs.models import Conversation, Run, Step
from tests.orgs.orgs_support import SECRET, World, call, levels_post, run_scripted, scripted, signed_in, tool_payloads

ASK = {
    "text": "Bimbamjob invoices 2024 payments",
    "model": "demo-large",
    "level": "approfondi",
    "resources": ["kb:factures", "agents"],
}


def _demo_conversation(world: World) -> tuple[Conversation, Run]:
    conv = Conversation.objects.create(organisation=world.demo, user=world.admin, title="secret")
    run = Run.objects.create(conversation=conv, organisation=world.demo, user=world.admin, model="demo-large")
    return conv, run


# Every endpoint --------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("intruder", ["mallory", "mia"])  # another organisation's admin; a member of the same one
def test_conversations_and_runs_of_others_are_not_found(world: World, intruder: str) -> None:
    conv, run = _demo_conversation(world)
    client = signed_in(intruder)
    assert client.get(f"/c/{conv.pk}/").status_code == 404
    assert client.post(f"/c/{conv.pk}/send", ASK).status_code == 404
    assert client.post(f"/runs/{run.pk}/stop").status_code == 404
    assert client.post(f"/runs/{run.pk}/stop", HTTP_HX_REQUEST="true").status_code == 404
    run.refresh_from_db()
    assert not run.stop_requested
    assert conv.messages.count() == 0 and conv.runs.count() == 1


@pytest.mark.django_db
def test_another_organisations_profiles_are_not_found(world: World) -> None:
    client = signed_in("demo")
    other = world.other_profile
    assert client.get(f"/settings/profiles/{other.pk}/").status_code == 404
    edit = {"name": "hijacked", "instructions": "x", "default_model": "", "tools": ["kb"]}
    assert client.post(f"/settings/profiles/{other.pk}/", edit).status_code == 404
    assert client.post(f"/settings/profiles/{other.pk}/delete").status_code == 404
    other.refresh_from_db()
    assert other.name == "other-checker" and other.organisation == world.other
    assert client.get("/settings/profiles/999999/").status_code == 404


@pytest.mark.django_db
def test_the_settings_pages_show_and_change_only_the_admins_own_organisation(world: World) -> None:
    AgentProfile.objects.create(organisation=world.demo, name="demo-verifier", instructions="x", tools=["kb"])
    client = signed_in("mallory")
    html = client.get("/settings/").content.decode()
    assert "Other Company" in html and "other-checker" in html
    assert "Demo Company" not in html and "demo-verifier" not in html
    assert client.post("/settings/models", {"restrict": "1", "models": ["demo-large"]}).status_code == 302
    assert client.post("/settings/levels", levels_post(parallel__max_parallel_agents=1)).status_code == 302
    profile = {"name": "new-one", "instructions": "x", "default_model": "", "tools": ["kb"]}
    assert client.post("/settings/profiles/new", profile).status_code == 302
    demo = Organisation.objects.get(slug="demo")
    assert demo.allowed_models is None and demo.max_parallel_agents == 4 and not demo.reasoning_levels.exists()
    assert set(demo.agent_profiles.values_list("name", flat=True)) == {"demo-verifier"}
    other = Organisation.objects.get(slug="other")
    assert other.allowed_models == ["demo-large"] and other.max_parallel_agents == 1
    assert set(other.agent_profiles.values_list("name", flat=True)) == {"other-checker", "new-one"}


# Documents, through the knowledge backend and through runs ------------------------------------------


async def test_org_knowledge_never_returns_another_organisations_documents(aworld: World) -> None:
    mine = OrgKnowledge(aworld.demo.pk)
    theirs = OrgKnowledge(aworld.other.pk)
    other_ids = [f"doc-{d.pk}" for d in aworld.other_docs]
    assert await mine.read(other_ids) == {}
    assert await mine.describe("secrets") is None
    assert await mine.existing(["secrets", "factures", "nothing"]) == {"factures"}  # a run's start checks its bases
    assert "secrets" in await theirs.existing(["secrets"])
    hits, count = await mine.search("secrets", "Zanzibar payroll", 10)
    assert (hits, count) == ([], 0)
    # The same slug in both organisations: each sees only its own documents.
    hits, count = await mine.search("factures", "Zanzibar payroll Bimbamjob", 10)
    demo_ids = {
        f"doc-{pk}"
        async for pk in Document.objects.filter(knowledge_base__organisation=aworld.demo).values_list("pk", flat=True)
    }
    assert hits and {h.id for h in hits} <= demo_ids
    assert all(SECRET not in h.snippet for h in hits)
    # The other organisation reads its own documents (the ids are real).
    assert set(await theirs.read(other_ids)) == set(other_ids)


async def test_a_run_naming_another_organisations_document_ids_reads_nothing_of_them(aworld: World) -> None:
    other_ids = [f"doc-{d.pk}" for d in aworld.other_docs]
    task = {
        "instruction": "Read these documents: " + ", ".join(other_ids),
        "model": "demo-small",
        "resources": ["kb:factures"],
    }

    def agent_reads(request: ModelRequest) -> ModelResponse:
        return ModelResponse(
            tool_calls=[
                call("kb_read", ids=other_ids),
                call("kb_search", query="Zanzibar payroll", kb="secrets"),
            ]
        )

    def agent_submits(request: ModelRequest) -> ModelResponse:
        return ModelResponse(tool_calls=[call("submit_result", findings="Nothing readable.", sources=[], gaps=[])])

    run = await run_scripted(
        aworld.demo,
        {
            "demo-large": scripted(
                ModelResponse(
                    tool_calls=[
                        call("kb_read", ids=other_ids),
                        call("kb_search", query="Zanzibar payroll", kb="factures"),
                    ]
                ),
                ModelResponse(tool_calls=[call("agents", tasks=[task])]),
                ModelResponse(text="Nothing."),
            ),
            "demo-small": scripted(agent_reads, agent_submits),
        },
    )
    assert run.outcome.status == "ok"
    main = run.requests("demo-large")
    (read,) = tool_payloads(main[1], "kb_read")
    assert read == {"error": " ".join(f"{i}: no such document." for i in other_ids)}
    (search,) = tool_payloads(main[1], "kb_search")
    assert all(h["id"] not in other_ids for h in search["hits"])
    agent = run.requests("demo-small")
    (agent_read,) = tool_payloads(agent[1], "kb_read")
    assert "no such document" in agent_read["error"]
    (agent_search,) = tool_payloads(agent[1], "kb_search")
    assert agent_search["error"].startswith("Knowledge base 'secrets' does not exist.")
    # Nothing any model received, and nothing the run kept, holds the other organisation's text.
    received = [m.content for r in (*main, *agent) for m in r.messages]
    assert not [c for c in received if SECRET in c]
    assert not [s for s in run.events if SECRET in json.dumps(s.model_dump(mode="json"))]


async def test_demo_runs_of_two_organisations_with_the_same_base_read_only_their_own(
    aworld: World, fast_demo: None
) -> None:
    for user, org in ((aworld.admin, aworld.demo), (aworld.mallory, aworld.other)):
        client = AsyncClient()
        await client.aforce_login(user)
        question = {**ASK, "text": "Bimbamjob invoices Zanzibar payroll"}
        assert (await client.post("/c/new", question)).status_code == 302
        run = await Run.objects.filter(organisation=org).order_by("-created").afirst()
        assert run is not None
        await execution.wait_for(run.pk)
        await run.arefresh_from_db()
        assert run.status == "ok"
        own = {
            f"doc-{pk}"
            async for pk in Document.objects.filter(knowledge_base__organisation=org).values_list("pk", flat=True)
        }
        assert run.sources and {s["id"] for s in run.sources} <= own
        steps = [json.dumps(s.data) async for s in Step.objects.filter(run=run)]
        if org == aworld.demo:
            assert SECRET not in run.answer and not [s for s in steps if SECRET in s]
        else:
            assert SECRET in run.answer  # the other organisation does read its own document
