"""One delegation scenario through ``run_chat``, against the OpenAI-wire server and the Mistral-wire server.

The main model delegates to two agents in parallel; each searches and reads its knowledge base; the
first corrects an invalid tool call and submits, the second is forced to land on its last turn.
Token counts are what the server reported and costs are those counts at the shipped catalogue's
prices.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from typing import Any

import pytest

from assistant.catalogue.loading import infos_from_file
from assistant.engine.agent import run_agent
from assistant.engine.catalogue import Catalogue
from assistant.engine.events import Event, TextDeltaEvent
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.loop import run_chat
from assistant.engine.outcomes import AgentTask
from assistant.engine.policy import RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.tools import Document, Toolbox
from assistant.engine.types import Message
from assistant.engine.usage import AgentBudget
from tests.providers.provider_support import Brain, Wire, check_billed_as_reported
from tests.providers.wire import Turn, sse_reply

pytestmark = pytest.mark.parametrize("server", ["openai", "mistral"], indirect=True)

SHIPPED = {m.id: m for m in infos_from_file()}
# (main model, agent model, their names on the provider) per dialect.
MODELS = {
    "openai": ("gpt-5", "gpt-4o-mini", {"gpt-5": "gpt-5", "gpt-4o-mini": "gpt-4o-mini"}),
    "mistral": (
        "mistral-large",
        "mistral-small",
        {"mistral-large": "mistral-large-latest", "mistral-small": "mistral-small-latest"},
    ),
}
QUESTION = "Bimbamjob: invoices 2024, payments and relationship"
KNOWLEDGE = MemoryKnowledge(
    {
        "factures": [
            Document(
                "doc-1",
                "factures",
                "Invoice F-2024-031 Bimbamjob",
                "Bimbamjob invoice of 18,400 EUR, paid 76 days late.",
            ),
            Document(
                "doc-2",
                "factures",
                "Invoice F-2024-077 Bimbamjob",
                "Bimbamjob invoice of 6,250 EUR, unpaid at year end.",
            ),
        ],
        "comptes-rendus": [
            Document(
                "doc-3",
                "comptes-rendus",
                "Bimbamjob steering committee",
                "Bimbamjob asked to pay in three instalments.",
            ),
        ],
    }
)


async def test_delegation_scenario_counts_what_the_server_reported_at_catalogue_prices(wire: Wire) -> None:
    main_id, agent_id, names = MODELS[wire.dialect]
    brain = Brain(wire.dialect, names)
    wire.server.brain = brain
    catalogue = Catalogue([SHIPPED[main_id], SHIPPED[agent_id]])
    for model_id in (main_id, agent_id):
        wire.model(SHIPPED[model_id], api_model=names[model_id])
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    ctx = RunContext(
        catalogue=catalogue,
        models=wire.models.__getitem__,
        toolbox=Toolbox(knowledge=KNOWLEDGE),
        emit=emit,
        electricity_zone="FRA",
    )
    request = RunRequest(
        messages=(Message.user(QUESTION),),
        model=main_id,
        level="approfondi",
        resources=("kb:factures", "kb:comptes-rendus", "agents"),
    )

    outcome = await run_chat(request, ctx)

    # The run: two agents, the first ok after correcting its invalid call, the second landed by force.
    assert outcome.status == "ok", outcome.error
    assert "[doc-1]" in outcome.text and outcome.text == "".join(
        e.text for e in events if isinstance(e, TextDeltaEvent)
    )
    first, second = sorted(outcome.agents, key=lambda a: a.task.resources)[::-1]
    assert (first.task.resources, first.status, first.rounds) == (("kb:factures",), "ok", 4)
    assert "Invalid arguments" in json.dumps([r.body for r in wire.server.requests])
    assert {s.id for s in first.sources} == {"doc-1", "doc-2"}
    assert (second.status, second.forced_landing, second.rounds) == ("interrupted", True, 2)
    assert "round budget" in second.reason
    assert {s.id for s in outcome.agents[0].sources} | {s.id for s in outcome.agents[1].sources} == set(ctx.sources)

    # What reached the wire: reasoning effort only for a model that reasons, the forced landing, the
    # agents' isolation, and each agent's requests growing by appending only (the cache prefix holds).
    bodies = [r.body for r in wire.server.requests]
    main_bodies = [b for b in bodies if b["model"] == names[main_id]]
    agent_bodies = [b for b in bodies if b["model"] == names[agent_id]]
    assert len(main_bodies) == 2 and len(agent_bodies) == 6
    if SHIPPED[main_id].reasons:
        assert main_bodies[0]["reasoning_effort"] == "high"
    else:
        assert all("reasoning_effort" not in b for b in main_bodies)
    # Agents reason at the level's effort (Approfondi: high) translated for their own model.
    agent_effort = SHIPPED[agent_id].effort_for("high")
    assert all(b.get("reasoning_effort") == agent_effort for b in agent_bodies)
    forced = [b for b in agent_bodies if isinstance(b.get("tool_choice"), dict)]
    assert [b["tool_choice"]["function"]["name"] for b in forced] == ["submit_result"]
    by_agent: dict[str, list[list[Any]]] = defaultdict(list)
    for b in agent_bodies:
        assert QUESTION not in json.dumps(b["messages"])
        by_agent[b["messages"][1]["content"]].append(b["messages"])
    assert len(by_agent) == 2
    for requests in by_agent.values():
        for before, after in itertools.pairwise(requests):
            assert after[: len(before)] == before

    # Usage: exactly what the server reported, at the catalogue's prices.
    assert set(ctx.usage.by_model) == {main_id, agent_id}
    assert ctx.usage.cost_eur == pytest.approx(check_billed_as_reported(ctx.usage, catalogue, brain))
    assert first.usage.cost_eur + second.usage.cost_eur == pytest.approx(ctx.usage.by_model[agent_id].cost_eur)
    totals = ctx.usage.as_dict()
    assert totals["carbon_estimated"] is True
    assert totals["carbon_g"] == pytest.approx(sum(m.carbon_g for m in ctx.usage.by_model.values()), abs=1e-6)


async def test_a_stream_broken_after_text_ends_the_agent_or_the_run_in_error_never_a_crash(wire: Wire) -> None:
    main_id, agent_id, names = MODELS[wire.dialect]
    catalogue = Catalogue([SHIPPED[main_id], SHIPPED[agent_id]])
    wire.model(SHIPPED[agent_id], api_model=names[agent_id])
    wire.model(SHIPPED[main_id], api_model=names[main_id])
    ctx = RunContext(catalogue=catalogue, models=wire.models.__getitem__, toolbox=Toolbox(knowledge=KNOWLEDGE))

    # An agent whose answer breaks off after its first words: the agent fails, with the reason.
    search = (("kb_search", json.dumps({"query": "Bimbamjob", "kb": "factures"})),)
    wire.server.script(
        sse_reply(wire.dialect, names[agent_id], Turn("Let me search the invoices.", search), cut_after=3)
    )
    task = AgentTask(
        instruction="Find the invoices.", model=catalogue[agent_id], resources=("kb:factures",), max_rounds=3
    )
    outcome = await run_agent(ctx, "agent-1", task, AgentBudget(), None)
    assert outcome.status == "error" and "broke off" in outcome.reason

    # The main model's answer breaking off: the run ends in error and keeps what was written.
    wire.server.script(
        sse_reply(wire.dialect, names[main_id], Turn("Bimbamjob paid late and then stopped"), cut_after=4)
    )
    result = await run_chat(RunRequest(messages=(Message.user(QUESTION),), model=main_id), ctx)
    assert result.status == "error" and "broke off" in (result.error or "")
    assert result.text == "Bimbamjob paid late"
