"""The policy an admin sets is enforced on the server, for every entry point and every agent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from pytest_django.fixtures import Settings as SettingsWrapper

from assistant.catalogue import snapshot
from assistant.catalogue.loading import add_demo_entries
from assistant.engine.errors import RequestRefused
from assistant.engine.types import ModelRequest, ModelResponse
from assistant.orgs.models import AgentProfile, Organisation
from assistant.runs import execution, intake
from assistant.runs.models import Run, Step
from tests.chat.chat_support import ASK
from tests.orgs.orgs_support import (
    World,
    call,
    catalogue_entry,
    levels_post,
    run_scripted,
    scripted,
    signed_in,
    tool_payloads,
)


def _refused(org: Organisation, **changes: Any) -> str:
    """What ``create_run`` (the path every entry point takes) says when it refuses."""
    ask = intake.Ask(
        **{"text": ASK["text"], "model": "demo-large", "level": "approfondi", "resources": ("kb:factures",)} | changes
    )
    with pytest.raises(RequestRefused) as refused:
        org = Organisation.objects.get(pk=org.pk)  # as each request reads it
        intake.create_run(org.memberships.get(role="admin").user, org, None, ask)
    return str(refused.value)


@pytest.fixture
def more_models(settings: SettingsWrapper) -> Iterator[None]:
    """Two more catalogue models: ``cheap-tiny`` (ten times cheaper than demo-large), ``mid-model`` (not twice)."""
    settings.MISTRAL_API_KEY = "mistral-test-key"
    snapshot.forget_catalogue()
    add_demo_entries(offered_with_real_providers=True)  # these tests' main model is demo-large
    catalogue_entry("cheap-tiny", 0.1, 0.3)
    catalogue_entry("mid-model", 1.5, 4.5)
    yield
    snapshot.forget_catalogue()


# Refused before any model call ---------------------------------------------------------------


@pytest.mark.django_db
def test_a_model_outside_the_allowed_list_is_refused_with_the_allowed_ones(world: World) -> None:
    client = signed_in("demo")
    assert client.post("/settings/models", {"restrict": "1", "models": ["demo-large"]}).status_code == 302
    response = client.post("/c/new", {**ASK, "model": "demo-small"})
    assert response.status_code == 422
    assert (
        "The model &#x27;demo-small&#x27; is not allowed here. Allowed models: demo-large." in response.content.decode()
    )
    assert "not allowed here. Allowed models: demo-large." in _refused(world.demo, model="demo-small")
    assert "not allowed here" in _refused(world.demo, model="gpt-unknown")
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_agents_with_no_other_resource_is_refused_with_the_reason(world: World) -> None:
    response = signed_in("demo").post("/c/new", {**ASK, "resources": ["agents"]})
    assert response.status_code == 422 and "needs at least one other resource" in response.content.decode()
    message = _refused(world.demo, resources=("agents",))
    assert "needs at least one other resource" in message and "nothing to read" in message


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["nope", "secrets"])  # does not exist; exists only in the other organisation
def test_a_knowledge_base_the_user_may_not_read_is_refused_by_name(world: World, slug: str) -> None:
    response = signed_in("demo").post("/c/new", {**ASK, "resources": ["kb:factures", f"kb:{slug}", "agents"]})
    assert response.status_code == 422
    assert f"The knowledge base &#x27;{slug}&#x27; does not exist or you may not read it." in response.content.decode()
    assert f"The knowledge base '{slug}' does not exist or you may not read it." in _refused(
        world.demo, resources=(f"kb:{slug}",)
    )
    assert not Run.objects.exists()


async def test_a_run_is_checked_again_when_it_executes(aworld: World, fast_demo: None) -> None:
    """A run saved before an admin restricted the models is refused when it starts, not run."""
    user = aworld.admin
    ask = intake.Ask(text=ASK["text"], model="demo-small", level="approfondi", resources=("kb:factures",))
    run = (await sync_to_async(intake.create_run)(user, aworld.demo, None, ask)).run
    await Organisation.objects.filter(pk=aworld.demo.pk).aupdate(allowed_models=["demo-large"])
    await execution.execute_stored(run.pk)  # as a worker does: its start read from the database
    await run.arefresh_from_db()
    assert run.status == "error"
    assert "The model 'demo-small' is not allowed here" in run.error
    assert not await Step.objects.filter(run=run, kind="round_started").aexists()


async def test_a_knowledge_base_of_another_organisation_is_refused_when_the_run_executes(aworld: World) -> None:
    with pytest.raises(RequestRefused, match="The knowledge base 'secrets' does not exist or you may not read it"):
        await run_scripted(aworld.demo, {}, resources=("kb:secrets",))


# The agents tool and every agent ----------------------------------------------------------------


def _answer(request: ModelRequest) -> ModelResponse:
    return ModelResponse(text="Done.")


async def test_the_agents_tool_lists_only_allowed_models_twice_cheaper_with_prices(
    aworld: World, more_models: None
) -> None:
    client = AsyncClient()
    await client.aforce_login(aworld.admin)
    restrict = {"restrict": "1", "models": ["demo-large", "cheap-tiny", "mid-model"]}
    assert (await client.post("/settings/models", restrict)).status_code == 302
    await aworld.demo.arefresh_from_db()

    run = await run_scripted(aworld.demo, {"demo-large": scripted(_answer)})
    (agents,) = [t for t in run.requests("demo-large")[0].tools if t.name == "agents"]
    models = agents.parameters["properties"]["tasks"]["items"]["properties"]["model"]["enum"]
    assert models == ["cheap-tiny"]  # demo-small is cheaper but not allowed; mid-model is allowed but not cheap enough
    assert "cheap-tiny (Cheap-Tiny): 0.1 EUR in / 0.3 EUR out per million tokens" in agents.description
    assert "demo-small" not in agents.description and "mid-model" not in agents.description

    # And the composer offers exactly the allowed models.
    composer = (await client.get("/")).content.decode()
    assert all(f'value="{m}"' in composer for m in restrict["models"])
    assert 'value="demo-small"' not in composer


async def test_no_agents_tool_when_no_allowed_model_is_cheap_enough(aworld: World) -> None:
    await Organisation.objects.filter(pk=aworld.demo.pk).aupdate(allowed_models=["demo-large"])
    await aworld.demo.arefresh_from_db()
    run = await run_scripted(aworld.demo, {"demo-large": scripted(_answer)})
    assert "agents" not in {t.name for t in run.requests("demo-large")[0].tools}


async def test_every_agent_is_refused_a_model_outside_the_allowed_list(aworld: World, more_models: None) -> None:
    await Organisation.objects.filter(pk=aworld.demo.pk).aupdate(
        allowed_models=["demo-large", "cheap-tiny", "mid-model"]
    )
    await aworld.demo.arefresh_from_db()
    tasks = [
        {"instruction": "Find the invoices.", "model": "demo-small", "resources": ["kb:factures"]},
        {"instruction": "Find the invoices.", "model": "mid-model", "resources": ["kb:factures"]},
        {"instruction": "Find the invoices.", "model": "gpt-unknown", "resources": ["kb:factures"]},
    ]
    run = await run_scripted(
        aworld.demo, {"demo-large": scripted(ModelResponse(tool_calls=[call("agents", tasks=tasks)]), _answer)}
    )
    (payload,) = tool_payloads(run.requests("demo-large")[1], "agents")
    errors = [a["error"] for a in payload["agents"]]
    assert errors[0] == "The model 'demo-small' is not allowed in this organisation. Choose one of: cheap-tiny."
    assert errors[1].startswith("The model 'mid-model' cannot run agents here") and "cheap-tiny" in errors[1]
    assert errors[2].startswith("The model 'gpt-unknown' cannot run agents here")
    assert not [e for e in run.events if e.kind == "agent_started"]


# Agent profiles ---------------------------------------------------------------------------------


def _submit(request: ModelRequest) -> ModelResponse:
    return ModelResponse(tool_calls=[call("submit_result", findings="Nothing to add.", sources=[], gaps=[])])


async def test_a_profile_gives_its_instructions_and_default_model_and_limits_resources(aworld: World) -> None:
    await sync_to_async(AgentProfile.objects.create)(
        organisation=aworld.demo,
        name="verifier",
        instructions="Check every amount twice.",
        default_model="demo-small",
        tools=["kb"],
    )
    await sync_to_async(AgentProfile.objects.create)(
        organisation=aworld.demo, name="web-reader", instructions="Read the web.", tools=["web"]
    )
    tasks = [
        {"instruction": "Check the Bimbamjob invoices.", "profile": "verifier", "resources": ["kb:factures"]},
        {
            "instruction": "Check the invoices.",
            "profile": "web-reader",
            "model": "demo-small",
            "resources": ["kb:factures"],
        },
        {"instruction": "Check.", "profile": "other-checker", "model": "demo-small", "resources": ["kb:factures"]},
    ]
    run = await run_scripted(
        aworld.demo,
        {
            "demo-large": scripted(ModelResponse(tool_calls=[call("agents", tasks=tasks)]), _answer),
            "demo-small": scripted(_submit),
        },
    )
    first = run.requests("demo-large")[0]
    (agents,) = [t for t in first.tools if t.name == "agents"]
    assert agents.parameters["properties"]["tasks"]["items"]["properties"]["profile"]["enum"] == [
        "verifier",
        "web-reader",
    ]
    assert "verifier (receives: kb; default model demo-small)" in agents.description
    # The verifier ran on its default model, with its instructions in its system prompt.
    (agent_request,) = run.requests("demo-small")
    assert "Profile «verifier»:\nCheck every amount twice." in agent_request.messages[0].content
    (payload,) = tool_payloads(run.requests("demo-large")[1], "agents")
    ok, web_only, foreign = payload["agents"]
    assert ok["status"] == "ok" and ok["model"] == "demo-small"
    assert web_only["error"] == (
        "The agent profile 'web-reader' may only receive these kinds of resources: web; "
        "kb:factures cannot be given to it."
    )
    # Another organisation's profile does not exist here.
    assert foreign["error"] == "Unknown agent profile 'other-checker'. Profiles: verifier, web-reader."


# Levels and the parallel cap, set on the page, in a demo run ------------------------------------------


async def _demo_run(client: AsyncClient, **changes: Any) -> Run:
    response = await client.post("/c/new", {**ASK, **changes})
    assert response.status_code == 302, response.content.decode()[:500]
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    return run


async def _admin_client(world: World) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(world.admin)
    return client


async def test_an_agent_budget_of_two_makes_agents_land_forced_and_come_back_interrupted(
    aworld: World, fast_demo: None
) -> None:
    client = await _admin_client(aworld)
    assert (await client.post("/settings/levels", levels_post(approfondi__agent_rounds=2))).status_code == 302
    run = await _demo_run(client)
    assert run.status == "ok"
    finished = [s.data async for s in Step.objects.filter(run=run, kind="agent_finished")]
    assert len(finished) == 2
    for agent in finished:
        assert agent["status"] == "interrupted"
        assert agent["forced_landing"] is True
        assert agent["rounds"] == 2
        assert "round budget reached (2/2 rounds)" in agent["reason"]
    started = [s.data async for s in Step.objects.filter(run=run, kind="agent_started")]
    assert {s["max_rounds"] for s in started} == {2}
    # Maximal keeps its own budget.
    run = await _demo_run(client, level="maximal")
    assert {s.data["max_rounds"] async for s in Step.objects.filter(run=run, kind="agent_started")} == {10}


async def test_the_parallel_cap_refuses_agents_beyond_it(aworld: World, fast_demo: None) -> None:
    client = await _admin_client(aworld)
    assert (await client.post("/settings/levels", levels_post(parallel__max_parallel_agents=1))).status_code == 302
    run = await _demo_run(client)
    assert await Step.objects.filter(run=run, kind="agent_started").acount() == 1
    assert "Refused: at most 1 agents run at once." in run.answer


async def test_a_level_with_no_agent_budget_ignores_agents(aworld: World, fast_demo: None) -> None:
    client = await _admin_client(aworld)
    assert (await client.post("/settings/levels", levels_post(approfondi__agent_rounds=0))).status_code == 302
    run = await _demo_run(client)
    assert run.status == "ok"
    assert not await Step.objects.filter(run=run, kind="agent_started").aexists()
    assert "[doc-" in run.answer  # the main model searched and read itself
    run = await _demo_run(client, level="standard")
    assert not await Step.objects.filter(run=run, kind="agent_started").aexists()
