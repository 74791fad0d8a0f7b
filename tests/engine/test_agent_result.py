"""The explicit end: ``submit_result`` is validated; an invalid result goes back once as a tool error."""

from __future__ import annotations

import json

import pytest

from assistant.engine.events import AgentAction, AgentFinished
from assistant.engine.notes import without_note
from assistant.engine.types import ToolCall
from tests.engine.engine_support import (
    AGENT_A,
    FINDINGS,
    MAIN,
    call,
    forced,
    harness,
    main_delegating,
    reply,
    scripted,
    submit,
    tool_messages,
)

INVALID_RESULTS = {
    "missing findings": lambda: call("submit_result", sources=["fac-1"]),
    "empty findings": lambda: call("submit_result", findings="", sources=["fac-1"]),
    "sources not a list": lambda: call("submit_result", findings=FINDINGS, sources="fac-1"),
    "not JSON": lambda: ToolCall(id="call_broken", name="submit_result", arguments="{findings: oops"),
}


@pytest.mark.parametrize("kind", list(INVALID_RESULTS))
async def test_an_invalid_result_goes_back_once_as_a_tool_error_then_the_correction_is_ok(kind: str) -> None:
    invalid = INVALID_RESULTS[kind]()
    h = harness({MAIN.id: main_delegating(), AGENT_A.id: scripted(reply(invalid), reply(submit(FINDINGS, ["fac-1"])))})
    outcome = await h.run()

    requests = h.model(AGENT_A.id).requests
    assert len(requests) == 2
    [error] = tool_messages(requests[1], "submit_result")
    assert error.tool_call_id == invalid.id
    message = json.loads(without_note(error.content))["error"]
    assert "Invalid result" in message
    assert "submit_result again" in message
    if kind != "not JSON":
        assert ("sources" if kind == "sources not a list" else "findings") in message

    [agent] = outcome.agents
    assert agent.status == "ok"
    assert agent.reason == ""
    assert FINDINGS in agent.report
    assert "fac-1" in agent.report
    # The refused result and its correction are steps of the agent, in order.
    results = [e.action for e in h.of(AgentAction) if e.action.tool == "submit_result"]
    assert [(a.kind, a.ok) for a in results] == [("result", False), ("result", True)]
    assert "Invalid result" not in results[0].label and results[0].label


async def test_two_invalid_results_fail_the_agent() -> None:
    h = harness(
        {
            MAIN.id: main_delegating(),
            AGENT_A.id: scripted(
                reply(call("kb_search", query="Zorglub", kb="factures")),
                reply(call("submit_result", sources=["fac-1"])),
                reply(call("submit_result", findings="")),
            ),
        }
    )
    outcome = await h.run()

    assert len(h.model(AGENT_A.id).requests) == 3
    [agent] = outcome.agents
    assert agent.status == "error"
    assert "invalid twice" in agent.reason
    assert "findings" in agent.reason
    assert "Zorglub" in agent.report  # the partial record of what it did
    [finished] = h.of(AgentFinished)
    assert finished.status == "error"
    assert outcome.status == "ok"  # an agent's failure is not the run's
    results = [e.action for e in h.of(AgentAction) if e.action.tool == "submit_result"]
    assert [(a.kind, a.ok) for a in results] == [("result", False), ("result", False)]


async def test_an_invalid_result_on_the_forced_landing_still_gets_its_correction() -> None:
    h = harness(
        {
            MAIN.id: main_delegating(max_rounds=1),
            AGENT_A.id: scripted(reply(call("submit_result", gaps=["tout"])), reply(submit(FINDINGS, ["fac-1"]))),
        }
    )
    outcome = await h.run()

    requests = h.model(AGENT_A.id).requests
    assert [forced(r) for r in requests] == [True, True]
    assert tool_messages(requests[1], "submit_result")
    [agent] = outcome.agents
    assert agent.status == "interrupted"
    assert FINDINGS in agent.report
