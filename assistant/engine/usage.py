"""Usage and budgets as data with methods.

``RunUsage`` adds each call once, per model, with its cost and, when the model's carbon data is
known, its energy and carbon (``Impact``, computed by ``carbon.call_impact``); it adds another
``RunUsage`` too (``merge``), which is how a report sums runs and agents. ``UsageData`` is its saved
form (``RunUsage.as_data``, the ``usage`` of the events and of ``Run``), read back by ``RunUsage.of``.
``AgentBudget`` and ``AgentCounter`` bound an agent: rounds, cumulative tokens and seconds, checked
before each round, updated after its model call.
``UsageLedger`` is the hook a category budget reserves against before each call; ``CostCap`` caps
what one run may cost (a scheduled task's cap, per execution); ``Ledgers`` makes several ledgers one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from .causes import Cause
from .errors import BudgetExceeded, CostCapReached
from .marks import KEEP
from .notes import BudgetLeft
from .types import UsagePart


@dataclass(frozen=True, slots=True)
class Impact:
    """The energy (kWh) and carbon (grams CO2-equivalent) of one model call."""

    energy_kwh: float
    carbon_g: float


@dataclass(slots=True)
class ModelUsage:
    """Tokens, cost, energy and carbon of one model over several calls."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0
    cost_eur: float = 0.0
    energy_kwh: float = 0.0
    carbon_g: float = 0.0
    estimated_calls: int = 0
    """Calls whose energy and carbon were estimated (the others' model has no carbon data)."""
    tokens_estimated: int = 0
    """Calls whose tokens are an estimate: cut after they were sent, with no usage reported by the provider."""
    failed_calls: int = 0
    """Calls that failed: refused by the provider (billed nothing, not in ``calls``) or cut (billed, in ``calls``)."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, usage: UsagePart, cost_eur: float, impact: Impact | None = None, *, estimated: bool = False) -> None:
        """One call."""
        self.calls += 1
        self.tokens_estimated += int(estimated)
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cached_prompt_tokens += usage.cached_prompt_tokens
        self.reasoning_tokens += usage.reasoning_tokens
        self.cost_eur += cost_eur
        if impact is not None:
            self.energy_kwh += impact.energy_kwh
            self.carbon_g += impact.carbon_g
            self.estimated_calls += 1

    def merge(self, other: ModelUsage, sign: int = 1) -> None:
        """Add (``sign=-1``: take away) another model usage, calls and all."""
        self.calls += sign * other.calls
        self.prompt_tokens += sign * other.prompt_tokens
        self.completion_tokens += sign * other.completion_tokens
        self.cached_prompt_tokens += sign * other.cached_prompt_tokens
        self.reasoning_tokens += sign * other.reasoning_tokens
        self.cost_eur += sign * other.cost_eur
        self.energy_kwh += sign * other.energy_kwh
        self.carbon_g += sign * other.carbon_g
        self.estimated_calls += sign * other.estimated_calls
        self.tokens_estimated += sign * other.tokens_estimated
        self.failed_calls += sign * other.failed_calls

    def as_data(self) -> ModelUsageData:
        """Energy and carbon appear only for a model whose calls were estimated (no made-up zero)."""
        estimated = self.estimated_calls > 0
        return ModelUsageData(
            calls=self.calls,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens,
            reasoning_tokens=self.reasoning_tokens,
            cost_eur=round(self.cost_eur, 8),
            tokens_estimated=self.tokens_estimated or None,
            failed_calls=self.failed_calls or None,
            energy_wh=round(self.energy_kwh * 1000, 6) if estimated else None,
            carbon_g=round(self.carbon_g, 6) if estimated else None,
        )

    def as_dict(self) -> dict[str, Any]:
        return self.as_data().model_dump(mode="json")

    @classmethod
    def of(cls, data: ModelUsageData) -> ModelUsage:
        """A saved model usage read back: its calls were all estimated when it carries carbon."""
        return cls(
            calls=data.calls,
            prompt_tokens=data.prompt_tokens,
            completion_tokens=data.completion_tokens,
            cached_prompt_tokens=data.cached_prompt_tokens,
            reasoning_tokens=data.reasoning_tokens,
            cost_eur=data.cost_eur,
            energy_kwh=(data.energy_wh or 0.0) / 1000,
            carbon_g=data.carbon_g or 0.0,
            estimated_calls=data.calls if data.carbon_g is not None else 0,
            tokens_estimated=data.tokens_estimated or 0,
            failed_calls=data.failed_calls or 0,
        )


@dataclass(slots=True)
class RunUsage:
    """Usage by model; additive, so a run's total is the sum of each call counted once."""

    by_model: dict[str, ModelUsage] = field(default_factory=dict)

    def add(
        self, model: str, usage: UsagePart, cost_eur: float, impact: Impact | None = None, *, estimated: bool = False
    ) -> None:
        self.by_model.setdefault(model, ModelUsage()).add(usage, cost_eur, impact, estimated=estimated)

    def failed(self, model: str) -> None:
        """Count one failed call of ``model`` (what it billed, if anything, is added apart)."""
        self.by_model.setdefault(model, ModelUsage()).failed_calls += 1

    @property
    def tokens_estimated(self) -> int:
        """Calls whose tokens are an estimate (cut, no usage reported)."""
        return sum(m.tokens_estimated for m in self.by_model.values())

    @property
    def failed_calls(self) -> int:
        return sum(m.failed_calls for m in self.by_model.values())

    def merge(self, other: RunUsage, sign: int = 1) -> RunUsage:
        """Add (``sign=-1``: take away) another usage, model by model; returns this usage."""
        for name, m in other.by_model.items():
            self.by_model.setdefault(name, ModelUsage()).merge(m, sign)
        return self

    @classmethod
    def of(cls, data: UsageData | Mapping[str, Any] | None) -> RunUsage:
        """A saved usage (``as_data``, or its JSON as ``Run.usage`` keeps it) read back."""
        if data is None:
            return cls()
        if not isinstance(data, UsageData):
            data = UsageData.model_validate(data)
        return cls({name: ModelUsage.of(m) for name, m in data.by_model.items()})

    @property
    def prompt_tokens(self) -> int:
        return sum(m.prompt_tokens for m in self.by_model.values())

    @property
    def completion_tokens(self) -> int:
        return sum(m.completion_tokens for m in self.by_model.values())

    @property
    def cached_prompt_tokens(self) -> int:
        return sum(m.cached_prompt_tokens for m in self.by_model.values())

    @property
    def cost_eur(self) -> float:
        return sum(m.cost_eur for m in self.by_model.values())

    @property
    def total_tokens(self) -> int:
        return sum(m.total_tokens for m in self.by_model.values())

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self.by_model.values())

    @property
    def energy_kwh(self) -> float:
        return sum(m.energy_kwh for m in self.by_model.values())

    @property
    def carbon_g(self) -> float:
        return sum(m.carbon_g for m in self.by_model.values())

    @property
    def carbon_estimated(self) -> bool:
        """Whether every call's carbon was estimated (else the total leaves some calls out)."""
        return self.calls > 0 and all(m.estimated_calls == m.calls for m in self.by_model.values())

    def as_data(self) -> UsageData:
        return UsageData(
            cost_eur=round(self.cost_eur, 8),
            energy_wh=round(self.energy_kwh * 1000, 6),
            carbon_g=round(self.carbon_g, 6),
            carbon_estimated=self.carbon_estimated,
            total_tokens=self.total_tokens,
            tokens_estimated=self.tokens_estimated,
            failed_calls=self.failed_calls,
            by_model={name: m.as_data() for name, m in sorted(self.by_model.items())},
        )

    def as_dict(self) -> dict[str, Any]:
        """The JSON a run saves (``Run.usage``)."""
        return self.as_data().model_dump(mode="json")


class ModelUsageData(BaseModel):
    """One model's saved usage; ``energy_wh`` and ``carbon_g`` are absent when its calls were not estimated."""

    model_config = ConfigDict(frozen=True)

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0
    cost_eur: float = 0.0
    tokens_estimated: int | None = None
    """Calls whose tokens are an estimate; absent when none was."""
    failed_calls: int | None = None
    """Calls that failed; absent when none did."""
    energy_wh: float | None = None
    carbon_g: float | None = None

    @model_serializer(mode="wrap")
    def _without_unknown_carbon(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None}


class UsageData(BaseModel):
    """A run's (or an agent's) saved usage, as ``RunUsage.as_data`` makes it: totals and each model's usage."""

    model_config = ConfigDict(frozen=True)

    cost_eur: float = 0.0
    energy_wh: float = 0.0
    carbon_g: float = 0.0
    carbon_estimated: bool = False
    total_tokens: int = 0
    tokens_estimated: int = 0
    failed_calls: int = 0
    by_model: Annotated[dict[str, ModelUsageData], KEEP] = {}
    """By model id."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentBudget:
    """What one agent may spend: rounds (its round budget), cumulative tokens, seconds; and each model call's timeout."""

    max_rounds: int = 5
    max_tokens: int = 60_000
    max_seconds: float = 120.0
    call_timeout: float = 60.0


@dataclass(slots=True)
class AgentCounter:
    """An agent's spending against its budget."""

    budget: AgentBudget
    rounds: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    last_call_tokens: int = 0
    last_call_seconds: float = 0.0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def seconds_left(self) -> float:
        return self.budget.max_seconds - self.elapsed

    def exhausted(self) -> Cause | None:
        """Why no round is left (rounds, tokens or time used up), or None while one is."""
        b = self.budget
        if self.rounds >= b.max_rounds:
            return Cause(code="rounds", used=self.rounds, limit=b.max_rounds)
        if self.tokens >= b.max_tokens:
            return Cause(code="tokens", used=self.tokens, limit=b.max_tokens)
        if self.elapsed >= b.max_seconds:
            return Cause(code="seconds", used=self.elapsed, limit=b.max_seconds)
        return None

    def check_before_round(self) -> None:
        """Raise ``BudgetExceeded`` when no round is left in rounds, tokens or time."""
        cause = self.exhausted()
        if cause is not None:
            raise BudgetExceeded(cause.english())

    def landing_cause(self) -> Cause | None:
        """Why the next round must be the last one (forced landing), or None while there is room.

        The last round is the last allowed by count, or the one after which the tokens or the
        time would, at the pace of the previous model call, run out.
        """
        b = self.budget
        if self.rounds >= b.max_rounds - 1:
            return Cause(code="rounds", used=b.max_rounds, limit=b.max_rounds)
        if self.rounds and self.tokens + 2 * self.last_call_tokens > b.max_tokens:
            return Cause(code="tokens", used=self.tokens, limit=b.max_tokens)
        if self.rounds and self.seconds_left < 2 * self.last_call_seconds:
            return Cause(code="seconds", used=self.elapsed, limit=b.max_seconds)
        return None

    def left(self) -> BudgetLeft:
        """What is left at the start of the next round: its rounds (that one included, at least 1: a round granted
        past the budget), tokens and whole seconds."""
        b = self.budget
        return BudgetLeft(
            rounds=max(1, b.max_rounds - self.rounds),
            tokens=max(0, b.max_tokens - self.tokens),
            seconds=max(0, int(self.seconds_left)),
        )

    def call_timeout(self) -> float:
        """The hard timeout of the next call: never past the agent's time budget."""
        return max(0.001, min(self.budget.call_timeout, self.seconds_left))

    def after_call(self, usage: UsagePart | None, seconds: float) -> None:
        """Count one round: its model call's tokens and seconds (the call answered or failed)."""
        self.rounds += 1
        spent = (usage.prompt_tokens + usage.completion_tokens) if usage else 0
        self.tokens += spent
        self.last_call_tokens = spent
        self.last_call_seconds = seconds


class UsageLedger(Protocol):
    """Reserves tokens before a call and settles them after (category budgets implement this).

    ``reserve`` raises ``BudgetExceeded`` when the reservation does not fit; the run then stops
    as Stop does.
    """

    async def reserve(self, model: str, tokens: int) -> object: ...

    async def settle(self, reservation: object, model: str, usage: UsagePart | None, cost_eur: float) -> None: ...


class CostCap:
    """What one run may cost, in EUR: a ``UsageLedger`` checked before each call, counted after it.

    The call that crosses the cap is billed, and the run stops then as Stop does, with the cause
    ``cost_cap`` (``cap_reached``, which ``RunContext`` reads after each call): the calls then in flight
    (parallel agents, one each at most) are aborted and billed as cut (what their provider reported, else
    an estimate of what was sent), and no call starts after it (``reserve`` raises ``CostCapReached``).
    """

    def __init__(self, cap_eur: float) -> None:
        self.cap_eur = cap_eur
        self.spent_eur = 0.0

    async def reserve(self, model: str, tokens: int) -> object:
        if self.spent_eur >= self.cap_eur:
            raise CostCapReached(f"cost cap reached ({self.spent_eur:.4f} of {self.cap_eur:.4f} EUR)")
        return None

    async def settle(self, reservation: object, model: str, usage: UsagePart | None, cost_eur: float) -> None:
        self.spent_eur += cost_eur

    @property
    def reached(self) -> bool:
        return self.spent_eur >= self.cap_eur


def cap_reached(ledger: UsageLedger) -> bool:
    """Whether ``ledger`` is, or holds, a ``CostCap`` that its calls have reached."""
    if isinstance(ledger, CostCap):
        return ledger.reached
    if isinstance(ledger, Ledgers):
        return any(cap_reached(held) for held in ledger.ledgers)
    return False


class Ledgers:
    """Several ledgers as one (a scheduled run's cost cap and its category): a call must fit in each.

    When one refuses, what the ones before it reserved is released (settled with no usage).
    """

    def __init__(self, *ledgers: UsageLedger) -> None:
        self.ledgers = ledgers

    async def reserve(self, model: str, tokens: int) -> object:
        held: list[tuple[UsageLedger, object]] = []
        try:
            for ledger in self.ledgers:
                held.append((ledger, await ledger.reserve(model, tokens)))
        except BudgetExceeded:
            for ledger, reservation in held:
                await ledger.settle(reservation, model, None, 0.0)
            raise
        return held

    async def settle(self, reservation: object, model: str, usage: UsagePart | None, cost_eur: float) -> None:
        assert isinstance(reservation, list)
        for ledger, held in reservation:
            await ledger.settle(held, model, usage, cost_eur)
