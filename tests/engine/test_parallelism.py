"""Parallelism: up to 4 agents per call run at once; a 5th task, or a 5th agent at once, is refused."""

from __future__ import annotations

import asyncio

from assistant.engine.events import AgentStarted
from assistant.engine.models.function import CallInfo, FunctionModel
from assistant.engine.types import ModelRequest, ModelResponse
from tests.engine.engine_support import AGENT_A, MAIN, delegate, harness, reply, scripted, submit, task, tool_payloads

KBS = ["kb:factures", "kb:contrats"]


def tasks(n: int) -> list[dict[str, object]]:
    return [task(f"Tâche numéro {i + 1}.", AGENT_A.id, [KBS[i % 2]]) for i in range(n)]


async def test_four_agents_run_at_the_same_time() -> None:
    agent = FunctionModel(scripted(*[reply(submit("Fait."))] * 4), AGENT_A, latency=0.3)
    h = harness({MAIN.id: scripted(reply(delegate(*tasks(4))), reply(text="Réponse.")), AGENT_A.id: agent})
    outcome = await h.run()

    assert [a.status for a in outcome.agents] == ["ok"] * 4
    assert len(agent.intervals) == 4
    starts = [start for start, _ in agent.intervals]
    ends = [end for _, end in agent.intervals]
    assert max(starts) < min(ends)  # every call started before any of them ended


async def test_a_fifth_task_in_one_call_is_refused() -> None:
    h = harness(
        {
            MAIN.id: scripted(reply(delegate(*tasks(5))), reply(text="Réponse.")),
            AGENT_A.id: scripted(*[reply(submit("Fait."))] * 4),
        }
    )
    outcome = await h.run()

    assert len(h.of(AgentStarted)) == 4
    assert len(outcome.agents) == 4
    [payload] = tool_payloads(h.main.requests[1], "agents")
    results = payload["agents"]
    assert [r.get("status") for r in results[:4]] == ["ok"] * 4
    assert results[4]["task"] == 5
    assert "Refused" in results[4]["error"]
    assert "at most 4 tasks per call" in results[4]["error"]
    assert "Tâche numéro 5." not in {e.instruction for e in h.of(AgentStarted)}


async def test_no_more_than_four_agents_at_once_across_calls_of_one_turn() -> None:
    running = peak = 0

    async def agent(request: ModelRequest, info: CallInfo) -> ModelResponse:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.1)
        running -= 1
        return reply(submit("Fait."))

    first, second = delegate(*tasks(3)), delegate(*tasks(3))
    h = harness({MAIN.id: scripted(reply(first, second), reply(text="Réponse.")), AGENT_A.id: agent})
    outcome = await h.run()

    assert peak == 4
    assert len(h.of(AgentStarted)) == 4
    assert len(outcome.agents) == 4
    refusals = [r["error"] for p in tool_payloads(h.main.requests[1], "agents") for r in p["agents"] if "error" in r]
    assert len(refusals) == 2
    assert all("at most 4 agents run at once" in e for e in refusals)
