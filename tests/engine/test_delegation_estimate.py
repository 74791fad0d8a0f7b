"""A delegation's cost checked before its agents launch: its two figures, its step, its cap, and the question.

``estimate_max_eur`` is a bound the agents' budgets enforce (an agent that spends every round at the most a call
can cost stays under it); ``estimate_eur`` starts from the agents' first requests, known before launch, and grows
as the organisation's recent agents did. Over the cap, the agents are not launched (no model call of theirs) and
the main model reads why, unless someone is asked and says to launch them; the wait is not the agents' time.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from assistant.engine.agent import first_request
from assistant.engine.estimate import (
    CALL_TRIES,
    DEFAULT_GROWTH,
    EXTRA_ROUNDS,
    AgentGrowth,
    Answer,
    DelegationCap,
    Question,
    agent_estimate,
    cap_of,
)
from assistant.engine.events import AgentFinished, AgentStarted, DelegationEstimated, ToolResultEvent
from assistant.engine.models.function import CallInfo, ModelFunction
from assistant.engine.outcomes import AgentTask
from assistant.engine.tokens import prompt_tokens
from assistant.engine.types import ModelRequest, ModelResponse, UsagePart
from tests.engine.engine_support import (
    AGENT_A,
    AGENT_B,
    MAIN,
    Harness,
    delegate,
    harness,
    reply,
    researcher,
    scripted,
    task,
)
from tests.waiting import until


def delegating_main(*tasks: dict[str, object]) -> ModelFunction:
    """A main model that delegates ``tasks`` once, then answers from what it read back."""
    return scripted(reply(delegate(*tasks)), reply(text="Voici la synthèse."))


TWO_TASKS = (
    task("Trouve les factures Zorglub.", "agent-a", ("kb:factures",)),
    task("Trouve le contrat Zorglub.", "agent-b", ("kb:contrats",), max_rounds=4),
)


def result_of(h: Harness, name: str = "agents") -> dict[str, Any]:
    (result,) = [e for e in h.of(ToolResultEvent) if e.name == name]
    request = h.main.requests[-1]
    (message,) = [m for m in request.messages if m.role == "tool" and m.name == name]
    content, _end = json.JSONDecoder().raw_decode(message.content)  # what follows it (the budget line) aside
    return {"event": result, "content": content}


async def test_a_delegation_is_a_step_with_both_figures_and_each_agent_carries_its_share() -> None:
    h = harness({MAIN.id: delegating_main(*TWO_TASKS), AGENT_A.id: researcher(), AGENT_B.id: researcher()})

    outcome = await h.run()

    assert outcome.status == "ok"
    (estimated,) = h.of(DelegationEstimated)
    assert estimated.decision == "launched" and estimated.cap_eur is None and estimated.cause is None
    assert estimated.tasks == 2 and estimated.models == ("agent-a", "agent-b")
    assert estimated.measured_agents == 0  # no recent agents: the documented default
    started = h.of(AgentStarted)
    assert sum(s.estimate_eur or 0 for s in started) == pytest.approx(estimated.estimate_eur)
    assert sum(s.estimate_max_eur or 0 for s in started) == pytest.approx(estimated.estimate_max_eur)
    # The step comes before its agents', and each agent's estimate is beside its actual cost.
    assert h.events.index(estimated) < h.events.index(started[0])
    for s, finished in zip(started, h.of(AgentFinished), strict=True):
        assert s.estimate_eur is not None and s.estimate_max_eur is not None
        assert 0 < s.estimate_eur <= s.estimate_max_eur
        assert 0 < finished.cost_eur <= s.estimate_max_eur


async def test_the_estimate_starts_from_each_agent_s_first_request_exactly() -> None:
    h = harness({MAIN.id: delegating_main(TWO_TASKS[0]), AGENT_A.id: researcher()})
    await h.run()

    (started,) = h.of(AgentStarted)
    first = h.model(AGENT_A.id).requests[0]
    sent = prompt_tokens(first)
    # What it was sent first is what the estimate counted: one round of the default growth's 3 is that request.
    expected = agent_estimate(AGENT_A, sent, first.max_output_tokens or AGENT_A.output_cap, 5, DEFAULT_GROWTH)
    assert started.estimate_eur == pytest.approx(expected.estimate_eur)
    assert started.estimate_max_eur == pytest.approx(expected.estimate_max_eur)
    rounds = DEFAULT_GROWTH.rounds
    assert expected.estimate_eur == pytest.approx(
        (
            (rounds * sent + DEFAULT_GROWTH.growth_tokens * rounds * (rounds - 1) / 2) * AGENT_A.input_price
            + rounds * DEFAULT_GROWTH.output_tokens * AGENT_A.output_price
        )
        / 1e6
    )


async def test_the_most_is_a_bound_an_agent_spending_every_round_at_the_most_stays_under() -> None:
    """The agent never submits (forced landing, relaunched once), each call billed a whole window and its output cap
    as the provider reports them: the most its round budget allows, short of tries cut and tried again."""
    cap = 4_000  # the agent's output cap (4,000 without reasoning)

    def greedy(request: ModelRequest, info: CallInfo) -> ModelResponse:
        usage = UsagePart(prompt_tokens=AGENT_A.context_window, completion_tokens=cap)
        return reply(text="Je cherche encore.", usage=usage)

    h = harness({MAIN.id: delegating_main(task("Tout sur Zorglub.", "agent-a", max_rounds=2)), AGENT_A.id: greedy})
    await h.run()

    (started,) = h.of(AgentStarted)
    (finished,) = h.of(AgentFinished)
    calls = len(h.model(AGENT_A.id).requests)
    assert calls == 2 + 1  # its 2 rounds, and the relaunch of its forced landing
    assert started.estimate_max_eur is not None
    assert finished.cost_eur <= started.estimate_max_eur
    per_call = (CALL_TRIES * AGENT_A.context_window * AGENT_A.input_price + cap * AGENT_A.output_price) / 1e6
    assert started.estimate_max_eur == pytest.approx((2 + EXTRA_ROUNDS) * per_call)


async def test_the_growth_of_recent_agents_on_the_same_model_is_used() -> None:
    asked: list[str] = []

    async def growth(model: str) -> AgentGrowth | None:
        asked.append(model)
        return AgentGrowth(rounds=4, growth_tokens=2_000, output_tokens=300, agents=12) if model == "agent-a" else None

    h = harness({MAIN.id: delegating_main(*TWO_TASKS), AGENT_A.id: researcher(), AGENT_B.id: researcher()})
    h.ctx.agent_growth = growth
    await h.run()

    assert sorted(asked) == ["agent-a", "agent-b"]  # once per model
    (estimated,) = h.of(DelegationEstimated)
    assert estimated.measured_agents == 12
    a, b = h.of(AgentStarted)
    first = prompt_tokens(h.model(AGENT_A.id).requests[0])
    measured = agent_estimate(AGENT_A, first, 4_000, 5, AgentGrowth(rounds=4, growth_tokens=2_000, output_tokens=300))
    assert a.estimate_eur == pytest.approx(measured.estimate_eur)
    # No recent agent on agent-b (its round budget is 4): its estimate is the default's.
    first_b = prompt_tokens(h.model(AGENT_B.id).requests[0])
    assert b.estimate_eur == pytest.approx(agent_estimate(AGENT_B, first_b, 4_000, 4, DEFAULT_GROWTH).estimate_eur)


async def test_a_growth_that_cannot_be_read_falls_back_to_the_default() -> None:
    async def broken(model: str) -> AgentGrowth | None:
        raise OSError("the database is away")

    h = harness({MAIN.id: delegating_main(TWO_TASKS[0]), AGENT_A.id: researcher()})
    h.ctx.agent_growth = broken
    assert (await h.run()).status == "ok"
    assert h.of(DelegationEstimated)[0].measured_agents == 0


async def test_over_its_cap_with_no_one_to_ask_a_delegation_is_not_launched_and_the_model_is_told_why() -> None:
    h = harness({MAIN.id: delegating_main(*TWO_TASKS)})  # no agent model: a call to one would fail the run
    h.ctx.delegation_cap = DelegationCap(cap_eur=0.001)

    outcome = await h.run()

    assert outcome.status == "ok" and outcome.agents == []
    assert h.of(AgentStarted) == []
    (estimated,) = h.of(DelegationEstimated)
    assert estimated.decision == "refused" and estimated.cap_eur == 0.001
    assert estimated.estimate_max_eur > 0.001
    cause = estimated.cause
    assert cause is not None and cause.code == "delegation_cap"
    assert cause.used == pytest.approx(estimated.estimate_max_eur) and cause.limit == 0.001
    read = result_of(h)
    assert read["event"].ok is False
    delegation = read["content"]["delegation"]
    assert delegation["launched"] is False and delegation["cap_eur"] == 0.001
    assert delegation["estimate_eur"] == pytest.approx(estimated.estimate_eur)
    assert delegation["estimate_max_eur"] == pytest.approx(estimated.estimate_max_eur)
    assert "Answer without agents, or delegate fewer tasks" in delegation["message"]
    assert h.ctx.agents_started == 0 and h.ctx.active_agents == 0


async def test_under_its_cap_a_delegation_launches_and_can_never_cost_more_than_the_cap() -> None:
    h = harness({MAIN.id: delegating_main(*TWO_TASKS), AGENT_A.id: researcher(), AGENT_B.id: researcher()})
    h.ctx.delegation_cap = DelegationCap(cap_eur=100.0)

    await h.run()

    (estimated,) = h.of(DelegationEstimated)
    assert estimated.decision == "launched" and estimated.cap_eur == 100.0
    assert sum(f.cost_eur for f in h.of(AgentFinished)) <= estimated.estimate_max_eur <= 100.0


def test_the_cap_is_the_lowest_of_the_request_s_and_the_organisation_s() -> None:
    assert cap_of(None, None) is None
    assert cap_of(0.5, None) == 0.5 and cap_of(None, 0.2) == 0.2 and cap_of(0.5, 0.2) == 0.2


class Asker:
    """Someone asked about a delegation over its cap: answers ``answer`` after ``delay`` seconds (None: never)."""

    def __init__(self, answer: Answer | None, delay: float = 0.0) -> None:
        self.answer, self.delay = answer, delay
        self.questions: list[Question] = []

    async def __call__(self, question: Question) -> Answer:
        self.questions.append(question)
        await asyncio.sleep(self.delay if self.answer is not None else 3600)
        assert self.answer is not None
        return self.answer


async def test_asked_and_told_to_launch_the_agents_launch_with_the_time_they_would_have_had() -> None:
    asker = Asker("launch", delay=0.3)
    h = harness({MAIN.id: delegating_main(*TWO_TASKS), AGENT_A.id: researcher(), AGENT_B.id: researcher()})
    h.ctx.delegation_cap = DelegationCap(cap_eur=0.001, confirm=asker, confirm_seconds=30)
    began = h.ctx.started

    outcome = await h.run()

    assert outcome.status == "ok" and [a.status for a in outcome.agents] == ["ok", "ok"]
    asking, launched = h.of(DelegationEstimated)
    assert (asking.decision, launched.decision) == ("asking", "launched")
    (question,) = asker.questions
    assert question.key == asking.question and question.call_id == asking.call_id and question.seconds == 30
    assert asking.expires_at > 0 and question.estimate_max_eur == pytest.approx(asking.estimate_max_eur)
    # The wait is not counted in the run's time (the agents' time budget comes from it): the run's start moved by it.
    assert h.ctx.started - began >= 0.3


@pytest.mark.parametrize(("asker", "decision"), [(Asker("decline"), "declined"), (Asker(None), "unanswered")])
async def test_asked_and_told_no_or_nothing_in_time_the_run_answers_without_them(asker: Asker, decision: str) -> None:
    h = harness({MAIN.id: delegating_main(*TWO_TASKS)})  # no agent model: launching one would fail the run
    h.ctx.delegation_cap = DelegationCap(cap_eur=0.001, confirm=asker, confirm_seconds=0.2)

    outcome = await h.run()

    assert outcome.status == "ok" and outcome.agents == [] and outcome.text == "Voici la synthèse."
    asking, answered = h.of(DelegationEstimated)
    assert asking.decision == "asking" and answered.decision == decision
    assert answered.cause is not None and answered.cause.kind == decision
    message = result_of(h)["content"]["delegation"]["message"]
    assert ("chose to have you answer without" if decision == "declined" else "did not answer") in message


async def test_stop_while_the_user_is_asked_stops_the_run() -> None:
    asker = Asker(None)
    h = harness({MAIN.id: delegating_main(*TWO_TASKS)})
    h.ctx.delegation_cap = DelegationCap(cap_eur=0.001, confirm=asker, confirm_seconds=60)

    async def stop_when_asked() -> None:
        await until(lambda: asker.questions, "the user to be asked")
        h.ctx.cancel.cancel()

    stopper = asyncio.ensure_future(stop_when_asked())
    outcome = await asyncio.wait_for(h.run(), 60)  # a guard against hanging, not a measure
    await stopper

    assert outcome.status == "stopped" and outcome.agents == []
    asking, stopped = h.of(DelegationEstimated)
    assert (asking.decision, stopped.decision) == ("asking", "stopped")
    assert stopped.cause is not None and stopped.cause.code == "stopped_by_user"
    assert len(h.main.requests) == 1  # nothing more was asked of the main model


def test_an_agent_s_first_request_is_what_it_sends_first() -> None:
    h = harness({})
    agent_task = AgentTask(instruction="Trouve les factures.", model=AGENT_A, resources=("kb:factures",), max_rounds=3)
    request = first_request(h.ctx, agent_task, None)
    assert [m.role for m in request.messages] == ["system", "user"]
    assert "Trouve les factures." in request.messages[1].content
    assert request.max_output_tokens == 4_000 and {t.name for t in request.tools} >= {"kb_search", "submit_result"}
