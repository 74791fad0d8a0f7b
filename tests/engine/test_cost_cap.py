"""A run's cost cap (a scheduled task's, per execution) stops the run as Stop does, with its own cause."""

from __future__ import annotations

import pytest

from assistant.engine.causes import Cause
from assistant.engine.errors import BudgetExceeded, CostCapReached
from assistant.engine.events import AgentFinished, Event, FinalEvent, StoppedEvent, UsageEvent
from assistant.engine.loop import run_chat
from assistant.engine.types import UsagePart
from assistant.engine.usage import CostCap, Ledgers
from tests.engine.test_ledger import REQUEST, TokenLedger, _context


async def test_a_cap_above_the_run_changes_nothing() -> None:
    events: list[Event] = []
    ctx = _context(CostCap(1.0), events)
    outcome = await run_chat(REQUEST, ctx)
    assert outcome.status == "ok"
    assert not any(isinstance(e, StoppedEvent) for e in events)


async def test_a_cap_crossed_during_delegation_stops_the_run_at_once_with_the_agents_findings() -> None:
    # The same run uncapped says what each call costs: the main model's, each agent's first (a search), ...
    uncapped: list[Event] = []
    await run_chat(REQUEST, _context(CostCap(1.0), uncapped))
    costs = [e.cost_eur for e in uncapped if isinstance(e, UsageEvent)]
    # ... so that a cap crossed by the first of the agents' second calls (both searched by then) stops the run there.
    cap = CostCap(sum(costs[:3]) + costs[3] / 2)
    events: list[Event] = []
    ctx = _context(cap, events)
    outcome = await run_chat(REQUEST, ctx)
    assert outcome.status == "stopped"
    assert ctx.cancel.cause == Cause(code="cost_cap")
    stopped = [e for e in events if isinstance(e, StoppedEvent)]
    assert [e.message for e in stopped] == ["stopped: the task's cost cap is reached"]
    finished = [e for e in events if isinstance(e, AgentFinished)]
    assert {e.status for e in finished} == {"stopped"} and len(finished) == 2
    assert all("Searched" in e.report for e in finished)  # each agent's findings so far are kept
    # The same calls summed in another order: equal but for floating-point rounding.
    assert cap.spent_eur == pytest.approx(ctx.usage.cost_eur) and ctx.usage.cost_eur >= cap.cap_eur
    # The main model once, each agent twice (the other agent's second call was in flight at the crossing: it
    # answered or was aborted, billed either way); nothing started after the crossing, no final answer.
    assert ctx.usage.calls == 5
    assert not any(isinstance(e, FinalEvent) for e in events)


async def test_a_cap_already_reached_refuses_the_next_call() -> None:
    cap = CostCap(0.01)
    await cap.settle(
        await cap.reserve("demo-large", 100), "demo-large", UsagePart(prompt_tokens=1, completion_tokens=1), 0.01
    )
    try:
        await cap.reserve("demo-large", 100)
    except CostCapReached as e:
        assert isinstance(e, BudgetExceeded)
    else:
        raise AssertionError("the cap should refuse")


async def test_ledgers_release_what_an_earlier_one_reserved_when_a_later_one_refuses() -> None:
    category = TokenLedger(10_000)
    both = Ledgers(category, CostCap(0.0))
    try:
        await both.reserve("demo-large", 4_000)
    except CostCapReached:
        pass
    else:
        raise AssertionError("the cap should refuse")
    assert category.remaining == 10_000  # the category's reservation was released
    held = await Ledgers(category, CostCap(1.0)).reserve("demo-large", 4_000)
    assert category.remaining == 6_000
    await Ledgers(category, CostCap(1.0)).settle(
        held, "demo-large", UsagePart(prompt_tokens=1_000, completion_tokens=500), 0.001
    )
    assert category.remaining == 8_500
