"""A failed model call is one of its agent's actions in the panel, saying whether it was billed."""

from __future__ import annotations

from django.utils import translation

from assistant.chat.presenters import agents_of
from assistant.engine.events import AgentStarted, ModelCallFailed


def test_a_failed_call_shows_among_its_agent_s_actions() -> None:
    started = AgentStarted(
        agent_id="agent-1",
        instruction="Find the invoices.",
        model="demo-small",
        model_label="Demo Small",
        resources=("kb:factures",),
        max_rounds=5,
    )
    refused = ModelCallFailed(
        agent_id="agent-1", model="demo-small", error_kind="server_error", billed=False, status=500
    )
    cut = ModelCallFailed(agent_id="agent-1", model="demo-small", error_kind="timeout", billed=True)
    with translation.override("en"):
        (agent,) = agents_of([started, refused, cut])
        assert [(a.ok, a.label) for a in agent.actions] == [
            (False, "Model call refused by the provider (HTTP 500): not billed"),
            (False, "Model call cut (the model did not answer in time): billed for what was sent"),
        ]
    with translation.override("fr"):
        (agent,) = agents_of([started, refused, cut])
        assert agent.actions[0].label == "Appel au modèle refusé par le fournisseur (HTTP 500) : non facturé"
        assert "le modèle n’a pas répondu à temps" in agent.actions[1].label  # the kind in words, not its code
