"""A failed model call is one of its agent's actions in the panel, saying whether it was billed."""

from __future__ import annotations

import uuid

from django.template.loader import render_to_string
from django.utils import translation

from assistant.chat.agent_views import agents_of
from assistant.engine.events import AgentFinished, AgentStarted, ModelCallFailed, UsageEvent, usage_from
from assistant.runs.models import Run

STARTED = AgentStarted(
    agent_id="agent-1",
    instruction="Find the invoices.",
    model="demo-small",
    model_label="Demo Small",
    resources=("kb:factures",),
    max_rounds=5,
)


def test_a_failed_call_shows_among_its_agent_s_actions() -> None:
    refused = ModelCallFailed(
        agent_id="agent-1", model="demo-small", error_kind="server_error", billed=False, status=500
    )
    cut = ModelCallFailed(agent_id="agent-1", model="demo-small", error_kind="timeout", billed=True)
    with translation.override("en"):
        (agent,) = agents_of([STARTED, refused, cut])
        assert [(a.ok, a.label) for a in agent.actions] == [
            (False, "Model call refused by the provider (HTTP 500): not billed"),
            (False, "Model call cut (the model did not answer in time): billed for what was sent"),
        ]
    with translation.override("fr"):
        (agent,) = agents_of([STARTED, refused, cut])
        assert agent.actions[0].label == "Appel au modèle refusé par le fournisseur (HTTP 500) : non facturé"
        assert "le modèle n’a pas répondu à temps" in agent.actions[1].label  # the kind in words, not its code


def test_an_agent_s_estimated_cost_is_marked_in_its_line_and_its_panel() -> None:
    reported = UsageEvent(
        agent_id="agent-1", model="demo-small", prompt_tokens=900, completion_tokens=20, cost_eur=0.002
    )
    cut = UsageEvent(
        agent_id="agent-1",
        model="demo-small",
        prompt_tokens=1_000,
        completion_tokens=0,
        cost_eur=0.0007,
        estimated=True,
        cost_source="estimated",
        estimated_eur=0.0007,
    )
    usage = usage_from([reported, cut])
    finished = AgentFinished(
        agent_id="agent-1",
        model="demo-small",
        status="stopped",
        rounds=2,
        seconds=1.0,
        cost_eur=usage.cost_eur,
        usage=usage.as_data(),
        report="",
    )
    (running,) = agents_of([STARTED, reported, cut])
    assert running.estimated_eur == 0.0007  # while it works, from its calls
    (agent,) = agents_of([STARTED, reported, cut, finished])
    assert agent.estimated_eur == 0.0007
    (clean,) = agents_of([STARTED, reported])
    view = {"run": Run(id=uuid.uuid4(), conversation_id=1)}
    for template in ("chat/_agent.html", "chat/_agent_panel_body.html"):
        with translation.override("en"):
            page = render_to_string(template, {"agent": agent, "view": view})
            assert "(of which 0.0007 € estimated)" in page
            assert "(of which" not in render_to_string(template, {"agent": clean, "view": view})
        with translation.override("fr"):
            assert "(dont 0,0007 € estimés)" in render_to_string(template, {"agent": agent, "view": view})
