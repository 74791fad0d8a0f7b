"""An agent's budget: calls, cumulative tokens and seconds each stop it, with its findings kept."""

from __future__ import annotations

import asyncio

from assistant.engine.agent import LANDING_NOTICE
from assistant.engine.events import AgentFinished
from assistant.engine.models.function import CallInfo, FunctionModel
from assistant.engine.policy import Policy
from assistant.engine.types import ModelRequest, ModelResponse, NamedTool, UsagePart
from tests.engine.engine_support import (
    AGENT_A,
    FINDINGS,
    MAIN,
    agents_told,
    endless_searcher,
    forced,
    harness,
    main_delegating,
    reply,
    submit,
)


async def test_call_budget_forces_a_landing_on_the_last_call() -> None:
    h = harness({MAIN.id: main_delegating(max_rounds=2), AGENT_A.id: endless_searcher()})
    outcome = await h.run()

    requests = h.model(AGENT_A.id).requests
    assert len(requests) == 2
    assert requests[0].tool_choice == "required"
    assert requests[1].tool_choice == NamedTool("submit_result")
    # The last call is announced in its last tool result (no user message after a tool message).
    assert requests[1].messages[-1].role == "tool" and requests[1].messages[-1].content.endswith(LANDING_NOTICE)

    [agent] = outcome.agents
    assert agent.status == "interrupted"
    assert "round budget" in agent.reason
    assert FINDINGS in agent.report
    assert agent.forced_landing
    assert agent.rounds == 2
    [finished] = h.of(AgentFinished)
    assert (finished.status, finished.forced_landing) == ("interrupted", True)

    [told] = agents_told(h.main.requests[1])
    assert told["status"] == "interrupted"
    assert "round budget" in str(told["reason"])
    assert "Do not fill the gaps" in str(told["note"])
    assert outcome.status == "ok"
    assert outcome.text == "Réponse."


async def test_token_budget_stops_an_agent_that_reported_large_usage() -> None:
    big = UsagePart(prompt_tokens=50_000, completion_tokens=15_000)
    h = harness(
        {MAIN.id: main_delegating(), AGENT_A.id: endless_searcher(big)},
        policy=Policy(agent_max_tokens=60_000),
    )
    outcome = await h.run()

    assert len(h.model(AGENT_A.id).requests) == 1  # no call after the tokens ran out
    [agent] = outcome.agents
    assert agent.status == "interrupted"
    assert "token" in agent.reason
    assert "65,000" in agent.reason
    assert "kb_search" in agent.tools_run
    assert "Zorglub retard 0" in agent.report  # what it had done is kept
    assert outcome.status == "ok"


async def test_tokens_running_low_force_the_landing_before_they_are_gone() -> None:
    usage = UsagePart(prompt_tokens=15_000, completion_tokens=5_000)
    h = harness(
        {MAIN.id: main_delegating(max_rounds=10), AGENT_A.id: endless_searcher(usage)},
        policy=Policy(agent_max_tokens=60_000),
    )
    outcome = await h.run()

    requests = h.model(AGENT_A.id).requests
    assert [forced(r) for r in requests] == [False, False, True]
    [agent] = outcome.agents
    assert agent.status == "interrupted"
    assert "token" in agent.reason
    assert FINDINGS in agent.report
    assert agent.usage.total_tokens == 60_000


async def test_seconds_run_out_before_the_calls() -> None:
    # 2.0 s for the request, 0.6 s kept for the main model to conclude: the agent gets about 1.4 s.
    h = harness(
        {MAIN.id: main_delegating(max_rounds=10), AGENT_A.id: FunctionModel(endless_searcher(), AGENT_A, latency=0.4)},
        policy=Policy(request_seconds=2.0, conclude_reserve_seconds=0.6),
    )
    outcome = await h.run()

    requests = h.model(AGENT_A.id).requests
    # Its time, not its 10 rounds, ended it: it landed (its last call forced) with rounds left.
    assert len(requests) < 10
    assert forced(requests[-1]) and not any(forced(r) for r in requests[:-1])
    [agent] = outcome.agents
    assert agent.status == "interrupted"
    assert "time" in agent.reason
    assert agent.cause is not None and agent.cause.code == "seconds"
    assert FINDINGS in agent.report
    assert outcome.status == "ok"
    assert outcome.text == "Réponse."


async def test_a_hanging_call_is_cut_by_the_hard_timeout() -> None:
    never = asyncio.Event()  # the call would answer only when set, which nothing does
    cut: list[int] = []

    async def hangs(request: ModelRequest, info: CallInfo) -> ModelResponse:
        try:
            await never.wait()
        except asyncio.CancelledError:
            cut.append(info.index)
            raise
        return reply(submit())

    h = harness(
        {MAIN.id: main_delegating(), AGENT_A.id: hangs},
        policy=Policy(agent_call_timeout=0.2),
    )
    outcome = await h.run()

    assert cut == [0]  # its one call was cancelled at the timeout, not answered
    [agent] = outcome.agents
    assert agent.status == "interrupted"
    assert "time" in agent.reason
    assert "0.2 s" in agent.reason
    assert outcome.status == "ok"
    assert outcome.text == "Réponse."
    [told] = agents_told(h.main.requests[1])
    assert told["status"] == "interrupted"
    assert "0.2 s" in str(told["reason"])
