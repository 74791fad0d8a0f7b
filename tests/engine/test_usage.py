"""Usage: what each agent and each model spent is exactly what the models reported, counted once, priced."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from assistant.engine.events import AgentFinished, FinalEvent, UsageEvent
from assistant.engine.loop import RunOutcome
from assistant.engine.models.function import CallInfo, ModelFunction
from assistant.engine.types import ModelRequest, ModelResponse, UsagePart
from tests.engine.engine_support import (
    AGENT_A,
    AGENT_B,
    MAIN,
    Harness,
    call,
    delegate,
    harness,
    reply,
    scripted,
    submit,
    task,
)

MAIN_USAGE = (
    UsagePart(prompt_tokens=1_200, completion_tokens=300, cached_prompt_tokens=800, reasoning_tokens=100),
    UsagePart(prompt_tokens=2_500, completion_tokens=400, cached_prompt_tokens=1_000),
)
AGENT_USAGE = {
    AGENT_A.id: (
        UsagePart(prompt_tokens=300, completion_tokens=40),
        UsagePart(prompt_tokens=450, completion_tokens=60, cached_prompt_tokens=256, reasoning_tokens=20),
    ),
    AGENT_B.id: (
        UsagePart(prompt_tokens=500, completion_tokens=70, cached_prompt_tokens=100),
        UsagePart(prompt_tokens=700, completion_tokens=90, reasoning_tokens=30),
    ),
}


def agent_on(model_id: str) -> ModelFunction:
    def function(request: ModelRequest, info: CallInfo) -> ModelResponse:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        usage = AGENT_USAGE[model_id][turn]
        if turn == 0:
            return reply(call("kb_search", query="Zorglub", kb="factures"), usage=usage)
        return reply(submit("Fait [fac-1].", ["fac-1"]), usage=usage)

    return function


async def run_three_agents() -> tuple[Harness, RunOutcome]:
    """Three agents: two on agent-a, one on agent-b."""
    h = harness(
        {
            MAIN.id: scripted(
                reply(
                    delegate(
                        task("Première.", AGENT_A.id, ["kb:factures"]),
                        task("Deuxième.", AGENT_B.id, ["kb:factures"]),
                        task("Troisième.", AGENT_A.id, ["kb:factures"]),
                    ),
                    usage=MAIN_USAGE[0],
                ),
                reply(text="Réponse [fac-1].", usage=MAIN_USAGE[1]),
            ),
            AGENT_A.id: agent_on(AGENT_A.id),
            AGENT_B.id: agent_on(AGENT_B.id),
        }
    )
    outcome = await h.run()
    return h, outcome


# Prices (EUR per million tokens): main 4 / 1 cached / 16 out; agent-a 0.4 / 0.1 / 1.6; agent-b 0.8 / 0.2 / 2.4.
AGENT_A_RUN = {
    "calls": 2,
    "prompt_tokens": 750,
    "completion_tokens": 100,
    "cached_prompt_tokens": 256,
    "reasoning_tokens": 20,
}
AGENT_A_RUN_COST = ((750 - 256) * 0.4 + 256 * 0.1 + 100 * 1.6) / 1e6  # 0.0003832
AGENT_B_RUN = {
    "calls": 2,
    "prompt_tokens": 1_200,
    "completion_tokens": 160,
    "cached_prompt_tokens": 100,
    "reasoning_tokens": 30,
}
AGENT_B_RUN_COST = ((1_200 - 100) * 0.8 + 100 * 0.2 + 160 * 2.4) / 1e6  # 0.001284
MAIN_RUN = {
    "calls": 2,
    "prompt_tokens": 3_700,
    "completion_tokens": 700,
    "cached_prompt_tokens": 1_800,
    "reasoning_tokens": 100,
}
MAIN_RUN_COST = ((3_700 - 1_800) * 4 + 1_800 * 1 + 700 * 16) / 1e6  # 0.0206


COUNTS = ("calls", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "reasoning_tokens")


def counts(usage: Mapping[str, object]) -> dict[str, object]:
    """The call and token counts of a model's usage."""
    return {k: usage[k] for k in COUNTS}


async def test_each_agent_usage_is_what_its_model_reported() -> None:
    h, outcome = await run_three_agents()

    assert [a.status for a in outcome.agents] == ["ok", "ok", "ok"]
    expected = {AGENT_A.id: (AGENT_A_RUN, AGENT_A_RUN_COST), AGENT_B.id: (AGENT_B_RUN, AGENT_B_RUN_COST)}
    finished = {e.agent_id: e for e in h.of(AgentFinished)}
    for agent in outcome.agents:
        model_id = agent.task.model.id
        run, cost = expected[model_id]
        assert list(agent.usage.by_model) == [model_id]  # an agent's usage holds its own model only
        assert counts(agent.usage.by_model[model_id].as_dict()) == run
        assert agent.usage.cost_eur == pytest.approx(cost)
        event = finished[agent.agent_id]
        assert counts(event.usage.by_model[model_id].model_dump()) == run
        assert event.usage.total_tokens == run["prompt_tokens"] + run["completion_tokens"]
        assert event.cost_eur == pytest.approx(cost)


async def test_run_usage_sums_each_call_once_per_model_at_catalogue_prices() -> None:
    h, outcome = await run_three_agents()

    by_model = h.ctx.usage.by_model
    assert set(by_model) == {MAIN.id, AGENT_A.id, AGENT_B.id}
    assert counts(by_model[MAIN.id].as_dict()) == MAIN_RUN  # the main model's own calls only
    assert counts(by_model[AGENT_A.id].as_dict()) == {k: 2 * v for k, v in AGENT_A_RUN.items()}  # two agents
    assert counts(by_model[AGENT_B.id].as_dict()) == AGENT_B_RUN
    assert by_model[MAIN.id].cost_eur == pytest.approx(MAIN_RUN_COST)
    assert by_model[AGENT_A.id].cost_eur == pytest.approx(2 * AGENT_A_RUN_COST)
    assert by_model[AGENT_B.id].cost_eur == pytest.approx(AGENT_B_RUN_COST)
    assert h.ctx.usage.cost_eur == pytest.approx(MAIN_RUN_COST + 2 * AGENT_A_RUN_COST + AGENT_B_RUN_COST)
    assert h.ctx.usage.total_tokens == 4_400 + 2 * 850 + 1_360
    assert h.ctx.usage.calls == 2 + 4 + 2

    events = h.of(UsageEvent)
    assert len(events) == 8  # one per call
    assert sum(e.prompt_tokens for e in events) == 3_700 + 1_500 + 1_200
    assert sum(e.cost_eur for e in events) == pytest.approx(h.ctx.usage.cost_eur)
    [final] = h.of(FinalEvent)
    assert final.usage == h.ctx.usage.as_data()
    assert sum(a.usage.cost_eur for a in outcome.agents) + by_model[MAIN.id].cost_eur == pytest.approx(
        h.ctx.usage.cost_eur
    )
