"""Policy: a request is checked before any model call; the agents tool offers only allowed, cheaper models."""

from __future__ import annotations

import pytest

from assistant.engine.errors import RequestRefused
from assistant.engine.events import AgentStarted
from assistant.engine.policy import DEFAULT_LEVELS, Level, Policy, RunRequest, plan_request
from assistant.engine.types import Message
from tests.engine.engine_support import (
    AGENT_A,
    AGENT_B,
    BANNED,
    CATALOGUE,
    MAIN,
    MID,
    delegate,
    harness,
    reply,
    researcher,
    scripted,
    task,
    tool_names,
    tool_payloads,
)

ALLOWED = Policy(allowed_models=frozenset({MAIN.id, AGENT_A.id, MID.id}))


def request(
    resources: tuple[str, ...] = ("kb:factures", "agents"), level: Level | None = "approfondi", model: str = MAIN.id
) -> RunRequest:
    return RunRequest(messages=(Message.user("Bonjour ?"),), model=model, level=level, resources=resources)


def refusal(req: RunRequest, policy: Policy = ALLOWED) -> str:
    with pytest.raises(RequestRefused) as refused:
        plan_request(req, CATALOGUE, policy)
    return str(refused.value)


def test_a_model_the_organisation_does_not_allow_is_refused() -> None:
    message = refusal(request(model=BANNED.id))
    assert "'banned-tiny' is not allowed" in message
    assert "main-large, agent-a, mid-medium" in message
    assert "is not allowed" in refusal(request(model="gpt-unknown"))


def test_agents_without_any_other_resource_is_refused_with_the_reason() -> None:
    message = refusal(request(resources=("agents",)))
    assert "at least one other resource" in message
    assert "nothing to read" in message


@pytest.mark.parametrize("resource", ["ftp", "kb:", "KB:factures", "agent"])
def test_an_unknown_resource_is_refused(resource: str) -> None:
    assert f"Unknown resource '{resource}'" in refusal(request(resources=("kb:factures", resource)))


@pytest.mark.parametrize(
    ("level", "agents", "rounds"),
    [("rapide", False, 0), ("standard", False, 0), ("approfondi", True, 5), ("maximal", True, 10), (None, True, 5)],
)
def test_levels_decide_delegation_and_its_budget(level: Level | None, agents: bool, rounds: int) -> None:
    plan = plan_request(request(level=level), CATALOGUE, ALLOWED)
    assert plan.agents is agents
    if agents:
        assert plan.agent_rounds == rounds


def test_no_delegation_when_no_allowed_model_is_twice_cheaper() -> None:
    plan = plan_request(request(), CATALOGUE, Policy(allowed_models=frozenset({MAIN.id, MID.id})))
    assert not plan.agents


async def test_below_approfondi_the_agents_tool_is_not_offered() -> None:
    h = harness({MAIN.id: scripted(reply(text="Réponse directe."))})
    outcome = await h.run(level="standard")

    assert outcome.status == "ok"
    assert "agents" not in tool_names(h.main.requests[0])
    assert tool_names(h.main.requests[0]) == {"kb_search", "kb_read"}


async def test_with_no_level_agents_are_honoured_with_the_default_budget() -> None:
    h = harness(
        {
            MAIN.id: scripted(
                reply(delegate(task("Factures de Zorglub.", AGENT_A.id, ["kb:factures"]))), reply(text="Fin.")
            ),
            AGENT_A.id: researcher(),
        }
    )
    outcome = await h.run(level=None)

    assert "agents" in tool_names(h.main.requests[0])
    [started] = h.of(AgentStarted)
    assert started.max_rounds == 5
    assert [a.status for a in outcome.agents] == ["ok"]


async def test_a_knowledge_base_that_does_not_exist_is_refused_before_any_model_call() -> None:
    h = harness({MAIN.id: scripted(reply(text="Jamais."))})
    with pytest.raises(RequestRefused, match="'archives' does not exist"):
        await h.run(resources=("kb:factures", "kb:archives", "agents"))
    assert h.main.requests == []
    assert h.events == []


async def test_the_agents_tool_lists_only_allowed_models_at_least_twice_cheaper_with_their_prices() -> None:
    h = harness({MAIN.id: scripted(reply(text="Réponse."))}, policy=ALLOWED)
    await h.run()

    [spec] = [t for t in h.main.requests[0].tools if t.name == "agents"]
    models = spec.parameters["properties"]["tasks"]["items"]["properties"]["model"]["enum"]
    assert models == [AGENT_A.id]  # mid-medium is allowed but not twice cheaper; the others are not allowed
    assert "agent-a (Agent A): 0.4 EUR in / 1.6 EUR out per million tokens" in spec.description
    assert "You are main-large (4 EUR in / 16 EUR out per million tokens)" in spec.description
    for absent in (MID.id, BANNED.id, AGENT_B.id):
        assert absent not in spec.description


async def test_an_agent_task_naming_a_model_not_allowed_is_refused_to_the_main_model() -> None:
    h = harness(
        {
            MAIN.id: scripted(
                reply(
                    delegate(
                        task("Avec un modèle interdit.", BANNED.id, ["kb:factures"]),
                        task("Avec un modèle trop cher.", MID.id, ["kb:factures"]),
                        task("Avec une ressource hors requête.", AGENT_A.id, ["kb:annuaire"]),
                    )
                ),
                reply(text="Je réponds moi-même."),
            )
        },
        policy=ALLOWED,
    )  # no agent model is resolvable: starting one would fail the run
    outcome = await h.run()

    [payload] = tool_payloads(h.main.requests[1], "agents")
    banned, mid, annuaire = (r["error"] for r in payload["agents"])
    assert "'banned-tiny' is not allowed in this organisation" in banned
    assert "agent-a" in banned
    assert "'mid-medium' cannot run agents here" in mid
    assert "kb:annuaire are not part of this request" in annuaire
    assert h.of(AgentStarted) == []
    assert outcome.status == "ok"
    assert outcome.text == "Je réponds moi-même."


async def test_the_agents_tool_is_a_tool_whose_schema_and_checks_come_from_its_run_s_argument_model() -> None:
    h = harness(
        {
            MAIN.id: scripted(
                reply(
                    delegate(
                        {
                            "instruction": "Sans modèle lisible.",
                            "model": AGENT_A.id,
                            "resources": ["kb:factures"],
                            "max_rounds": "beaucoup",
                        },
                        {"model": AGENT_A.id, "resources": ["kb:factures"]},
                        "pas un objet",
                    )
                ),
                reply(text="Je réponds moi-même."),
            )
        },
        policy=ALLOWED,
    )
    outcome = await h.run(level="approfondi")

    [spec] = [t for t in h.main.requests[0].tools if t.name == "agents"]
    item = spec.parameters["properties"]["tasks"]["items"]
    # The round ceiling is the level's agent round budget: the admin's level binds.
    assert item["properties"]["max_rounds"]["maximum"] == DEFAULT_LEVELS["approfondi"].agent_rounds
    assert item["required"] == ["instruction", "model", "resources"]
    assert AGENT_A.id in item["properties"]["model"]["enum"] and BANNED.id not in item["properties"]["model"]["enum"]
    assert outcome.status == "ok", outcome.error
    [payload] = tool_payloads(h.main.requests[1], "agents")
    unreadable, empty, not_an_object = (r["error"] for r in payload["agents"])
    assert unreadable.startswith("max_rounds: Input should be a valid integer")
    assert empty == "The task has no instruction."
    assert not_an_object == "Each task must be an object with instruction, model and resources."
    assert h.of(AgentStarted) == []
    assert outcome.status == "ok"
