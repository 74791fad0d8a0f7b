"""Stop aborts every model call in flight: the agents' too, while a call hangs (its stream is closed).

The models here hang for good on the call a test picks: a Stop that waited for the call would never end (the
suite's timeout fails it). Each aborted call is billed as a call cut after it was sent (what its provider
reported, else an estimate marked ``tokens_estimated``); nothing starts after Stop; each agent keeps what it
had found, with the reason "stopped on request" (or the budget's, the cost cap's).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from assistant.engine.catalogue import ModelInfo
from assistant.engine.causes import Cause
from assistant.engine.errors import BudgetExceeded
from assistant.engine.events import AgentFinished, FinalEvent, ModelCallFailed, StoppedEvent, UsageEvent
from assistant.engine.models.base import Model
from assistant.engine.types import ModelRequest, ModelResponse, StreamPart, TextDelta, ToolCallPart, UsagePart
from assistant.engine.usage import CostCap
from tests.engine.engine_support import (
    AGENT_A,
    AGENT_B,
    MAIN,
    OWN_DOCUMENT,
    TWO_AGENTS_TEXT,
    call,
    delegate,
    harness,
    main_delegating_to_two,
    read_own_document,
    reply,
    scripted,
    task,
)

PARTIAL = "Je recoupe encore la facture avec le contrat"


@dataclass
class Hang:
    """What a hanging call sends before it hangs: some text, and maybe its usage."""

    text: str = PARTIAL
    usage: UsagePart | None = None


@dataclass
class HangingModel(Model):
    """Answers ``answer(request, index)``; a ``Hang`` streams its text (and usage), then waits for good.

    It notes each call that hung, each stream closed while hanging (the abort), and each call made.
    """

    info: ModelInfo
    answer: Callable[[ModelRequest, int], ModelResponse | Hang]
    before: Callable[[int], object] | None = None
    requests: list[ModelRequest] = field(default_factory=list)
    hung: asyncio.Event = field(default_factory=asyncio.Event)
    closed: list[int] = field(default_factory=list)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        index = len(self.requests)
        self.requests.append(request)
        if self.before is not None:
            waited = self.before(index)
            if asyncio.iscoroutine(waited):
                await waited
        answer = self.answer(request, index)
        if isinstance(answer, ModelResponse):
            if answer.text:
                yield TextDelta(answer.text)
            for c in answer.tool_calls:
                yield ToolCallPart(c)
            yield answer.usage or UsagePart(prompt_tokens=500, completion_tokens=20)
            return
        try:
            yield TextDelta(answer.text)
            if answer.usage is not None:
                yield answer.usage
            self.hung.set()
            await asyncio.Event().wait()  # never answers
        finally:
            self.closed.append(index)


def read_then_hang(usage: UsagePart | None = None) -> Callable[[ModelRequest, int], ModelResponse | Hang]:
    """Round 1: read its own document; round 2 hangs."""

    def answer(request: ModelRequest, index: int) -> ModelResponse | Hang:
        if index == 0:
            return read_own_document(request)
        return Hang(usage=usage)

    return answer


async def _when_all_hung(*models: HangingModel) -> None:
    for m in models:
        await m.hung.wait()


async def test_stop_aborts_the_agents_hanging_calls_bills_them_as_cut_and_keeps_what_they_found() -> None:
    a, b = HangingModel(AGENT_A, read_then_hang()), HangingModel(AGENT_B, read_then_hang())
    h = harness({MAIN.id: main_delegating_to_two(), AGENT_A.id: a, AGENT_B.id: b})

    async def press_stop() -> None:
        await _when_all_hung(a, b)
        h.ctx.cancel.cancel()

    stopper = asyncio.ensure_future(press_stop())
    outcome = await h.run()
    await stopper

    # Each hanging call was aborted: its stream closed while it hung; nothing was asked after Stop.
    assert a.closed == [1] and b.closed == [1]
    assert len(a.requests) == len(b.requests) == 2 and len(h.main.requests) == 1
    assert outcome.status == "stopped" and outcome.text == TWO_AGENTS_TEXT
    assert h.of(FinalEvent) == []
    [stopped] = h.of(StoppedEvent)
    assert stopped.message == "stopped on request" and {s.id for s in stopped.sources} == {"fac-1", "con-1"}

    by_model = {agent.task.model.id: agent for agent in outcome.agents}
    for model_id, kb in ((AGENT_A.id, "factures"), (AGENT_B.id, "contrats")):
        agent = by_model[model_id]
        doc_id, title = OWN_DOCUMENT[kb]
        assert agent.status == "stopped" and agent.reason == "stopped on request"
        assert agent.report.startswith("Stopped on request; no report was written.")
        assert title in agent.report and PARTIAL in agent.report  # what it read, and what it was writing
        assert [s.id for s in agent.sources] == [doc_id] and agent.tools_run == ["kb_read"]
        # Two calls billed: the answered one as reported, the aborted one estimated (no usage came back).
        usage = agent.usage.by_model[model_id]
        assert usage.calls == 2 and usage.tokens_estimated == 1 and usage.failed_calls == 0
        assert usage.prompt_tokens > 500  # the reported 500, and the estimate of what the aborted call was sent
    assert {e.status for e in h.of(AgentFinished)} == {"stopped"}
    aborted = [e for e in h.of(UsageEvent) if e.agent_id is not None and e.estimated]
    assert len(aborted) == 2 and all(e.prompt_tokens > 0 and e.cost_eur > 0 for e in aborted)
    assert h.of(ModelCallFailed) == []  # an abort by Stop is not a failure
    assert h.ctx.usage.tokens_estimated == 2


async def test_an_aborted_call_that_reported_its_usage_is_billed_what_was_reported() -> None:
    reported = UsagePart(prompt_tokens=1_234, completion_tokens=56)
    a = HangingModel(AGENT_A, read_then_hang(reported))
    main = scripted(reply(delegate(task("Lis la facture de Zorglub.", AGENT_A.id, ["kb:factures"])), text="Un agent."))
    h = harness({MAIN.id: main, AGENT_A.id: a})

    async def press_stop() -> None:
        await a.hung.wait()
        h.ctx.cancel.cancel()

    stopper = asyncio.ensure_future(press_stop())
    outcome = await h.run()
    await stopper

    assert a.closed == [1]
    [agent] = outcome.agents
    usage = agent.usage.by_model[AGENT_A.id]
    assert usage.calls == 2 and usage.tokens_estimated == 0
    assert (usage.prompt_tokens, usage.completion_tokens) == (500 + 1_234, 20 + 56)


@dataclass
class GatedLedger:
    """A category ledger whose ``n``-th reservation (from 0) waits for ``gate``, then does what ``then`` says."""

    n: int
    gate: Callable[[], object]
    refuse: bool = False
    reserved: list[int] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    settled: list[int] = field(default_factory=list)

    async def reserve(self, model: str, tokens: int) -> object:
        index = len(self.reserved)
        self.reserved.append(index)
        if index == self.n:
            waited = self.gate()
            if asyncio.iscoroutine(waited):
                await waited
            if self.refuse:
                raise BudgetExceeded("the category's monthly budget is reached")
        return index

    async def settle(self, reservation: object, model: str, usage: UsagePart | None, cost_eur: float) -> None:
        assert isinstance(reservation, int)
        (self.released if usage is None else self.settled).append(reservation)


async def test_stop_while_a_reservation_is_being_made_releases_it_and_makes_no_call() -> None:
    a = HangingModel(AGENT_A, read_then_hang())
    main = scripted(reply(delegate(task("Lis la facture de Zorglub.", AGENT_A.id, ["kb:factures"])), text="Un agent."))
    h = harness({MAIN.id: main, AGENT_A.id: a})

    async def stop_then_grant() -> None:
        h.ctx.cancel.cancel()  # Stop comes while the agent's second call is being reserved
        await asyncio.sleep(0)

    # Reservations: the main model's (0), the agent's first (1), its second (2: Stop comes meanwhile).
    ledger = GatedLedger(n=2, gate=stop_then_grant)
    h.ctx.ledger = ledger
    outcome = await h.run()

    assert len(a.requests) == 1  # the second call was never made
    assert ledger.reserved == [0, 1, 2] and ledger.released == [2] and ledger.settled == [0, 1]
    [agent] = outcome.agents
    assert agent.status == "stopped" and agent.reason == "stopped on request"
    assert "Facture Zorglub mars 2024" in agent.report
    assert agent.usage.by_model[AGENT_A.id].calls == 1
    assert outcome.status == "stopped"


async def test_a_category_budget_refusing_one_agent_aborts_the_other_agents_hanging_call() -> None:
    a = HangingModel(AGENT_A, read_then_hang())

    def b_answer(request: ModelRequest, index: int) -> ModelResponse | Hang:
        return reply(call("kb_read", ids=["con-1"]))

    b = HangingModel(AGENT_B, b_answer)
    h = harness({MAIN.id: main_delegating_to_two(), AGENT_A.id: a, AGENT_B.id: b})
    # Reservations: the main model's, each agent's first, then A's second (which hangs), then B's second:
    # refused once A hangs.
    ledger = GatedLedger(n=4, gate=a.hung.wait, refuse=True)
    h.ctx.ledger = ledger
    outcome = await h.run()

    assert h.ctx.cancel.cause == Cause(code="category_budget")
    assert a.closed == [1] and len(b.requests) == 1
    assert outcome.status == "stopped"
    reasons = {agent.task.model.id: agent.reason for agent in outcome.agents}
    assert reasons == {AGENT_A.id: "stopped: the category's monthly budget is reached"} | {
        AGENT_B.id: "stopped: the category's monthly budget is reached"
    }
    # A's aborted call is billed (estimated) and settled; B's refused reservation charged nothing.
    assert ledger.settled == [0, 1, 2, 3] and ledger.released == []
    assert h.ctx.usage.by_model[AGENT_A.id].tokens_estimated == 1


async def test_the_call_that_crosses_the_cost_cap_aborts_the_other_agents_hanging_call() -> None:
    a = HangingModel(AGENT_A, read_then_hang())
    expensive = UsagePart(prompt_tokens=200_000, completion_tokens=10_000)  # about 0.1 EUR at agent B's prices

    def b_answer(request: ModelRequest, index: int) -> ModelResponse | Hang:
        if index == 0:
            return reply(call("kb_read", ids=["con-1"]))
        return reply(call("kb_search", query="Zorglub", kb="contrats"), usage=expensive)

    # B's second call answers once A hangs, and crosses the cap.
    b = HangingModel(AGENT_B, b_answer, before=lambda index: a.hung.wait() if index == 1 else None)
    h = harness({MAIN.id: main_delegating_to_two(), AGENT_A.id: a, AGENT_B.id: b})
    cap = CostCap(0.05)
    h.ctx.ledger = cap
    outcome = await h.run()

    assert h.ctx.cancel.cause == Cause(code="cost_cap")
    assert a.closed == [1] and len(a.requests) == len(b.requests) == 2
    assert outcome.status == "stopped"
    [stopped] = h.of(StoppedEvent)
    assert stopped.message == "stopped: the task's cost cap is reached"
    by_model = {agent.task.model.id: agent for agent in outcome.agents}
    assert {agent.status for agent in outcome.agents} == {"stopped"}
    assert by_model[AGENT_B.id].tools_run == ["kb_read"]  # the search of the crossing call is not run
    assert "Contrat cadre Zorglub" in by_model[AGENT_B.id].report
    assert "Facture Zorglub mars 2024" in by_model[AGENT_A.id].report
    assert cap.spent_eur > cap.cap_eur and cap.spent_eur == pytest.approx(h.ctx.usage.cost_eur)
    assert h.ctx.usage.by_model[AGENT_A.id].tokens_estimated == 1
