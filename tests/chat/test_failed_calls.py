"""A failed model call is one of its agent's actions in the panel, saying whether it was billed."""

from __future__ import annotations

from django.utils import translation

from assistant.chat.presenters import agents_of
from assistant.engine.events import AgentStarted, ModelCallFailed
from assistant.runs.models import Step


def _step(seq: int, event: AgentStarted | ModelCallFailed) -> Step:
    return Step(seq=seq, kind=event.kind, agent_id=event.agent_id or "", data=event.model_dump(mode="json"))


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
        (agent,) = agents_of([_step(1, started), _step(2, refused), _step(3, cut)])
        assert [(a["ok"], a["label"]) for a in agent.actions] == [
            (False, "Model call refused by the provider (HTTP 500): not billed"),
            (False, "Model call cut (timeout): billed for what was sent"),
        ]
    with translation.override("fr"):
        (agent,) = agents_of([_step(1, started), _step(2, refused)])
        assert agent.actions[0]["label"] == "Appel au modèle refusé par le fournisseur (HTTP 500) : non facturé"
