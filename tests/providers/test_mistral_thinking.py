"""Magistral's thinking, through the ``mistralai`` SDK against the Mistral-wire server: gathered with its signature
(which comes after the text here), shown as the round's reasoning, and sent back in place in the agent's next
requests, as a ``thinking`` chunk of its own turn before its text; never to another loop."""

from __future__ import annotations

import json

import pytest

from assistant.catalogue.loading import infos_from_file
from assistant.engine.agent import run_agent
from assistant.engine.events import ReasoningEvent
from assistant.engine.outcomes import AgentTask
from assistant.engine.usage import AgentBudget
from tests.providers.provider_support import Wire
from tests.providers.test_billing import harness
from tests.providers.wire import Turn, sse_reply

pytestmark = pytest.mark.parametrize("server", ["mistral"], indirect=True)

MAGISTRAL = {m.id: m for m in infos_from_file()}["magistral-small"]
SEARCH = ("kb_search", json.dumps({"query": "Bimbamjob", "kb": "factures"}))
REPORT = ("submit_result", json.dumps({"findings": "Bimbamjob paid late [doc-1].", "sources": ["doc-1"]}))


async def test_an_agents_thinking_goes_back_with_its_signature_in_its_own_turn(wire: Wire) -> None:
    h = harness(wire, MAGISTRAL)
    wire.models[MAGISTRAL.id] = wire.model(MAGISTRAL, api_model="magistral-small-latest", native_reasoning=True)
    wire.server.script(
        sse_reply(
            "mistral",
            "magistral-small-latest",
            Turn("Searching.", (SEARCH,), thinking="I should search the invoices.", signature="sig-1"),
        ),
        sse_reply(
            "mistral", "magistral-small-latest", Turn("", (REPORT,), thinking="Doc-1 answers it.", signature="sig-2")
        ),
    )
    task = AgentTask(instruction="Find the invoices.", model=MAGISTRAL, resources=("kb:factures",), max_rounds=4)
    outcome = await run_agent(h.ctx, "agent-1", task, AgentBudget(max_rounds=4), "high")

    assert outcome.status == "ok", outcome.reason
    first, second = (r.body for r in wire.server.requests)
    assert "reasoning_effort" not in first  # Magistral always reasons: no effort is sent
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    turn = second["messages"][2]
    assert turn["role"] == "assistant"
    assert turn["content"] == [
        {
            "type": "thinking",
            "thinking": [{"type": "text", "text": "I should search the invoices."}],
            "signature": "sig-1",
        },
        {"type": "text", "text": "Searching."},
    ]
    assert [c["function"]["name"] for c in turn["tool_calls"]] == ["kb_search"]
    assert second["messages"][3]["role"] == "tool"
    shown = [(e.agent_id, e.round, e.summary) for e in h.events if isinstance(e, ReasoningEvent)]
    assert shown == [("agent-1", 1, "I should search the invoices."), ("agent-1", 2, "Doc-1 answers it.")]
