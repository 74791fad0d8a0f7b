"""The forced landing: when the last call brings no result, the agent is relaunched once, then fails."""

from __future__ import annotations

import json

from assistant.engine.events import AgentAction, AgentFinished
from assistant.engine.notes import without_note
from tests.engine.engine_support import (
    AGENT_A,
    MAIN,
    agents_told,
    call,
    forced,
    harness,
    main_delegating,
    reply,
    scripted,
    submit,
    tool_messages,
)

SEARCH = reply(call("kb_search", query="Zorglub retard", kb="factures"))


async def test_no_result_after_the_forced_landing_and_its_relaunch_is_an_error_with_the_partial_record() -> None:
    h = harness(
        {
            MAIN.id: main_delegating(max_rounds=2),
            AGENT_A.id: scripted(
                SEARCH,
                reply(text="Je pense que Zorglub paie en retard."),
                reply(text="Je n'ai rien de plus."),
            ),
        }
    )
    outcome = await h.run()

    requests = h.model(AGENT_A.id).requests
    assert len(requests) == 3  # the budget's 2 calls, plus one relaunch
    assert [forced(r) for r in requests] == [False, True, True]
    [agent] = outcome.agents
    assert agent.status == "error"
    assert "no result" in agent.reason
    assert agent.forced_landing
    assert agent.tools_run == ["kb_search"]
    # The partial record says what it did and what it said.
    assert "Searched 'Zorglub retard' in factures" in agent.report
    assert "fac-1 Facture Zorglub mars 2024" in agent.report
    assert "Je pense que Zorglub paie en retard." in agent.report
    [finished] = h.of(AgentFinished)
    assert finished.status == "error"
    assert finished.report == agent.report

    [told] = agents_told(h.main.requests[1])
    assert told["status"] == "error"
    assert "Searched" in told["report"]
    assert outcome.status == "ok"


async def test_a_relaunch_that_returns_a_result_brings_the_findings() -> None:
    h = harness(
        {
            MAIN.id: main_delegating(max_rounds=2),
            AGENT_A.id: scripted(
                SEARCH,
                reply(text="Je réfléchis encore."),
                reply(submit("Retard de 45 jours [fac-1].", ["fac-1"])),
            ),
        }
    )
    outcome = await h.run()

    assert len(h.model(AGENT_A.id).requests) == 3
    [agent] = outcome.agents
    assert agent.status == "interrupted"
    assert "Retard de 45 jours [fac-1]." in agent.report


async def test_a_tool_called_on_the_forced_landing_is_not_run() -> None:
    h = harness(
        {
            MAIN.id: main_delegating(max_rounds=2),
            AGENT_A.id: scripted(
                SEARCH,
                reply(call("kb_read", ids=["fac-1"])),  # ignores the forced tool_choice
                reply(submit("Retard de 45 jours, d'après la recherche.", ["fac-1"])),
            ),
        }
    )
    outcome = await h.run()

    relaunch = h.model(AGENT_A.id).requests[2]
    [not_run] = tool_messages(relaunch, "kb_read")
    assert "only submit_result" in json.loads(without_note(not_run.content))["error"]
    [agent] = outcome.agents
    assert agent.status == "interrupted"
    assert agent.tools_run == ["kb_search"]
    assert agent.sources == []  # fac-1 was never read
    assert [e.action.tool for e in h.of(AgentAction)] == ["kb_search"]
