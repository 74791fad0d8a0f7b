"""A delegation's cost worked out before its agents launch: the most it can cost, and what it should cost.

``estimate_max_eur`` is a bound the agents' budgets enforce: an agent makes at most its round budget's calls plus
``EXTRA_ROUNDS`` (one to correct an invalid result, one to relaunch a forced landing that returned none); each
call is sent at most ``CALL_TRIES`` times (a try cut before anything was shown is billed what it was sent, and
tried again), each try's request within the model's context window (a request over it is refused by the provider
and bills nothing), and writes at most the agent's output cap. So one call costs at most
``CALL_TRIES × window × input price + output cap × output price``, and an agent at most that many calls of it.

``estimate_eur`` is what it should cost: each agent's first request, known exactly before launch (its system prompt,
instruction, scope and tool specs), sent again each round with what the rounds add (``AgentGrowth``: what this
organisation's recent agents on the same model added per round and wrote, over how many rounds), or
``DEFAULT_GROWTH`` when there are none. A delegation's figures are the sum of its agents'.

``DelegationCap`` is the cap the figures are compared with (``estimate_max_eur``, so that a delegation under its cap
can never cost more than the cap): the request's (the API's ``max_delegation_eur``) or the organisation's ("ask
before a delegation that can cost more than X EUR"); over it, a delegation is launched only if someone is there to
ask and says so (``Confirm``), else it is not (cause ``delegation_cap``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from .catalogue import ModelInfo
from .models.streaming import RetryPolicy

EXTRA_ROUNDS = 2
"""Rounds an agent may make past its round budget: one to correct an invalid result, one to relaunch its forced
landing when it returned no result (``agent._AgentLoop``)."""
CALL_TRIES = RetryPolicy().attempts
"""Tries of one model call; each one cut before anything was shown is billed what it was sent."""


@dataclass(frozen=True, slots=True)
class AgentGrowth:
    """How recent agents on one model spent a round: how many rounds they made, how many tokens each round's request
    grew by (what the previous round added: its call and its tools' results), how many tokens each call wrote.
    ``agents``: how many agents it was measured on (0: ``DEFAULT_GROWTH``)."""

    rounds: float
    growth_tokens: float
    output_tokens: float
    agents: int = 0


DEFAULT_GROWTH = AgentGrowth(rounds=3.0, growth_tokens=900.0, output_tokens=150.0)
"""When no recent agent ran on a model: 3 rounds (a search, a read, the result), 900 tokens added a round (a search's
hits, or a read's excerpts) and 150 written (a tool call, or a short report)."""


def growth_of(agents: Iterable[Sequence[tuple[int, int]]]) -> AgentGrowth | None:
    """How ``agents`` spent a round, each given as its calls' (prompt tokens, completion tokens) in order: their
    rounds on average, what their requests grew by from one call to the next, what a call wrote; None for none."""
    rounds: list[int] = []
    growths: list[float] = []
    outputs: list[int] = []
    for calls in agents:
        if not calls:
            continue
        rounds.append(len(calls))
        outputs += [completion for _prompt, completion in calls]
        if len(calls) > 1:
            growths.append(max(0, calls[-1][0] - calls[0][0]) / (len(calls) - 1))
    if not rounds:
        return None
    return AgentGrowth(
        rounds=sum(rounds) / len(rounds),
        growth_tokens=sum(growths) / len(growths) if growths else 0.0,
        output_tokens=sum(outputs) / len(outputs),
        agents=len(rounds),
    )


GrowthSource: TypeAlias = Callable[[str], Awaitable[AgentGrowth | None]]
"""This organisation's recent agents on a model (its id), or None when there are none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentEstimate:
    """One agent's figures, before it launches."""

    model: str
    first_request_tokens: int
    """Its first request (system prompt, instruction, scope, tool specs), as counted before launch."""
    output_cap: int
    max_calls: int
    estimate_eur: float
    estimate_max_eur: float


def agent_estimate(
    model: ModelInfo, first_request_tokens: int, output_cap: int, max_rounds: int, growth: AgentGrowth
) -> AgentEstimate:
    """One agent's figures: ``first_request_tokens`` its first request, ``output_cap`` what each of its calls may
    write, ``max_rounds`` its round budget, ``growth`` how agents on its model spend a round."""
    max_calls = max_rounds + EXTRA_ROUNDS
    per_call = (CALL_TRIES * model.context_window * model.input_price + output_cap * model.output_price) / 1e6
    most = max_calls * per_call
    rounds = max(1.0, min(growth.rounds, float(max_rounds)))
    # Round k (from 0) sends the first request plus k rounds' growth, and writes one round's output.
    prompt = rounds * first_request_tokens + growth.growth_tokens * rounds * (rounds - 1) / 2
    written = rounds * min(growth.output_tokens, float(output_cap))
    expected = (prompt * model.input_price + written * model.output_price) / 1e6
    return AgentEstimate(
        model=model.id,
        first_request_tokens=first_request_tokens,
        output_cap=output_cap,
        max_calls=max_calls,
        estimate_eur=min(expected, most),
        estimate_max_eur=most,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationEstimate:
    """A delegation's figures: the sum of its agents' (``agents``, in the order of its tasks)."""

    agents: tuple[AgentEstimate, ...]
    measured_agents: int = 0
    """How many recent agents the growth per round was measured on (0: the default growth for every model)."""

    @property
    def estimate_eur(self) -> float:
        return sum(a.estimate_eur for a in self.agents)

    @property
    def estimate_max_eur(self) -> float:
        return sum(a.estimate_max_eur for a in self.agents)


def delegation_estimate(agents: Sequence[AgentEstimate], growths: Sequence[AgentGrowth]) -> DelegationEstimate:
    return DelegationEstimate(agents=tuple(agents), measured_agents=sum(g.agents for g in growths))


Answer: TypeAlias = Literal["launch", "decline", "unanswered"]
"""What the user answered to a delegation over its cap: launch it, answer without it, or nothing in time."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """A delegation over its cap, asked of the user: the ``agents`` call it is, its figures and the cap, and how long
    the run waits for an answer (``seconds``; then it answers without the agents)."""

    call_id: str
    key: str
    """What the answer names (``DelegationEstimated.question``): one question's, never another's."""
    estimate_eur: float
    estimate_max_eur: float
    cap_eur: float
    seconds: float


Confirm: TypeAlias = Callable[[Question], Awaitable[Answer]]
"""Asks the user whether to launch a delegation over its cap, and waits for the answer (``unanswered`` after
``Question.seconds``). The run's Stop ends the wait on the caller's side."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationCap:
    """What a run's delegations may cost at most (``estimate_max_eur``): ``cap_eur``, the lowest of the request's and
    the organisation's; ``confirm``: who to ask when a delegation is over it (None: it is not launched)."""

    cap_eur: float
    confirm: Confirm | None = None
    confirm_seconds: float = 120.0


def cap_of(request_cap: float | None, organisation_cap: float | None) -> float | None:
    """The cap a run's delegations are compared with: the lowest of those set, or None."""
    caps = [c for c in (request_cap, organisation_cap) if c is not None]
    return min(caps) if caps else None


__all__ = [
    "CALL_TRIES",
    "DEFAULT_GROWTH",
    "EXTRA_ROUNDS",
    "AgentEstimate",
    "AgentGrowth",
    "Answer",
    "Confirm",
    "DelegationCap",
    "DelegationEstimate",
    "GrowthSource",
    "Question",
    "agent_estimate",
    "cap_of",
    "delegation_estimate",
    "growth_of",
]
