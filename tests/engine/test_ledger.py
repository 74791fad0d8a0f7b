"""A usage ledger (category budgets) reserves before each call and stops the run as Stop does."""

from __future__ import annotations

from assistant.demo.model import DEMO_MODELS, DemoModel
from assistant.engine.catalogue import Catalogue
from assistant.engine.errors import BudgetExceeded
from assistant.engine.events import AgentFinished, Event, StoppedEvent
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.loop import run_chat
from assistant.engine.policy import RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.tools import Document, Toolbox
from assistant.engine.types import Message, UsagePart
from assistant.engine.usage import UsageLedger


class TokenLedger:
    """Reserves input size + output cap against a fixed number of tokens; settles to real usage."""

    def __init__(self, tokens: int, max_calls: int | None = None) -> None:
        self.remaining = tokens
        self.max_calls = max_calls
        self.reserved: list[int] = []
        self.settled: list[tuple[str, int]] = []

    async def reserve(self, model: str, tokens: int) -> object:
        if tokens > self.remaining or (self.max_calls is not None and len(self.reserved) >= self.max_calls):
            raise BudgetExceeded(f"{tokens} tokens wanted, {self.remaining} left")
        self.remaining -= tokens
        self.reserved.append(tokens)
        return tokens

    async def settle(self, reservation: object, model: str, usage: UsagePart | None, cost_eur: float) -> None:
        assert isinstance(reservation, int)
        spent = usage.prompt_tokens + usage.completion_tokens if usage else 0
        self.remaining += reservation - spent
        self.settled.append((model, spent))


KB = MemoryKnowledge(
    {
        "invoices": [Document("doc-1", "invoices", "Invoice Bimbamjob", "Bimbamjob paid invoice F-1 76 days late.")],
        "meetings": [Document("doc-2", "meetings", "Meeting Bimbamjob", "Bimbamjob asked for a payment plan.")],
    }
)
REQUEST = RunRequest(
    messages=(Message.user("Bimbamjob invoices and meetings"),),
    model="demo-large",
    level="approfondi",
    resources=("kb:invoices", "kb:meetings", "agents"),
)


def _context(ledger: UsageLedger, events: list[Event]) -> RunContext:
    models = {m.id: DemoModel(m) for m in DEMO_MODELS}

    async def emit(event: Event) -> None:
        events.append(event)

    return RunContext(
        catalogue=Catalogue(DEMO_MODELS),
        models=models.__getitem__,
        toolbox=Toolbox(knowledge=KB),
        emit=emit,
        ledger=ledger,
    )


async def test_every_call_is_reserved_then_settled_to_its_real_usage() -> None:
    ledger = TokenLedger(10_000_000)
    events: list[Event] = []
    ctx = _context(ledger, events)
    outcome = await run_chat(REQUEST, ctx)
    assert outcome.status == "ok"
    assert len(ledger.reserved) == len(ledger.settled) == ctx.usage.calls
    assert sum(spent for _, spent in ledger.settled) == ctx.usage.total_tokens
    assert ledger.remaining == 10_000_000 - ctx.usage.total_tokens


async def test_a_budget_crossed_during_delegation_stops_the_run_and_keeps_findings() -> None:
    # The budget covers the main model's first call and each agent's first call (its search), no more.
    ledger = TokenLedger(10_000_000, max_calls=3)
    events: list[Event] = []
    outcome = await run_chat(REQUEST, _context(ledger, events))
    assert outcome.status == "stopped"
    stopped = [e for e in events if isinstance(e, StoppedEvent)]
    assert stopped and "budget" in stopped[0].message
    finished = [e for e in events if isinstance(e, AgentFinished)]
    assert len(finished) == 2
    assert {e.status for e in finished} == {"stopped"}
    assert all("Searched" in e.report for e in finished)  # each agent's findings so far are kept
