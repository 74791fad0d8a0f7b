"""What a delegation may cost, before its agents launch: its estimate (``estimate.py``), said as a step, and whether it
launches. Under its cap (or with none) it does; over it, the user is asked when someone can be, else it is not
launched and the main model reads why, with both estimates and the cap."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from .agent import first_request
from .causes import Cause
from .estimate import (
    DEFAULT_GROWTH,
    AgentGrowth,
    Answer,
    Confirm,
    DelegationEstimate,
    Question,
    agent_estimate,
    delegation_estimate,
)
from .events import Decision, DelegationEstimated
from .outcomes import AgentTask
from .policy import Plan
from .runtime import RunContext
from .tokens import prompt_tokens
from .tools import ToolOutcome
from .usage import AgentBudget

log = logging.getLogger(__name__)

Started = tuple[int, str, AgentTask, AgentBudget]
"""A task about to launch: its place in the call, its agent's id, the task, its budget."""


@dataclass(frozen=True, slots=True)
class CostCheck:
    """One run's delegations weighed against its cap (``RunContext.delegation_cap``)."""

    ctx: RunContext
    plan: Plan

    async def _estimate(self, started: list[Started]) -> DelegationEstimate:
        """The delegation's figures (``estimate.py``): each agent's first request as it would send it, its round budget,
        and how the organisation's recent agents on its model spent a round (the default when there are none, or
        when they cannot be read)."""
        ctx = self.ctx
        growths: dict[str, AgentGrowth] = {}
        for model_id in dict.fromkeys(task.model.id for _i, _a, task, _b in started):
            growth = None
            if ctx.agent_growth is not None:
                try:
                    growth = await ctx.agent_growth(model_id)
                except Exception:  # a figure to help the estimate, never a reason to fail the run
                    log.exception("the recent agents on %s could not be read: the default growth is used", model_id)
            growths[model_id] = growth or DEFAULT_GROWTH
        agents = []
        for _i, _agent_id, task, budget in started:
            request = first_request(ctx, task, self.plan.level_effort)
            cap = request.max_output_tokens or task.model.output_cap
            agents.append(
                agent_estimate(task.model, prompt_tokens(request), cap, budget.max_rounds, growths[task.model.id])
            )
        return delegation_estimate(agents, list(growths.values()))

    async def check(
        self,
        call_id: str,
        started: list[Started],
        results: list[dict[str, Any] | None],
    ) -> list[Started] | ToolOutcome:
        """The delegation's estimate, said as a step, and whether it launches: under its cap (or with none) it does,
        each agent carrying its figures; over it, the user is asked when someone can be (``DelegationCap.confirm``,
        the wait not counted in the agents' time), else it is not launched and the main model reads why."""
        ctx = self.ctx
        estimate = await self._estimate(started)
        cap = ctx.delegation_cap
        figures: dict[str, Any] = {
            "call_id": call_id,
            "estimate_eur": estimate.estimate_eur,
            "estimate_max_eur": estimate.estimate_max_eur,
            "cap_eur": cap.cap_eur if cap is not None else None,
            "tasks": len(started),
            "models": tuple(a.model for a in estimate.agents),
            "measured_agents": estimate.measured_agents,
        }
        launch = [
            (i, agent_id, dataclasses.replace(task, estimate=figure), budget)
            for (i, agent_id, task, budget), figure in zip(started, estimate.agents, strict=True)
        ]
        if cap is None or estimate.estimate_max_eur <= cap.cap_eur:
            await ctx.emit(DelegationEstimated(decision="launched", **figures))
            return launch
        over = Cause(code="delegation_cap", used=estimate.estimate_max_eur, limit=cap.cap_eur)
        if cap.confirm is None:
            await ctx.emit(DelegationEstimated(decision="refused", cause=over, **figures))
            return self._not_launched(started, results, figures, over)
        question = Question(
            call_id=call_id,
            key=uuid.uuid4().hex,
            estimate_eur=estimate.estimate_eur,
            estimate_max_eur=estimate.estimate_max_eur,
            cap_eur=cap.cap_eur,
            seconds=cap.confirm_seconds,
        )
        await ctx.emit(
            DelegationEstimated(
                decision="asking", question=question.key, expires_at=time.time() + cap.confirm_seconds, **figures
            )
        )
        answer = await self._wait_for(cap.confirm, question)
        if answer is None:  # Stop came while it waited: the run stops (its next round's check)
            await ctx.emit(DelegationEstimated(decision="stopped", cause=ctx.cancel.stop_cause, **figures))
            return self._not_launched(started, results, figures, ctx.cancel.stop_cause)
        if answer == "launch":
            await ctx.emit(DelegationEstimated(decision="launched", **figures))
            return launch
        decision: Decision = "declined" if answer == "decline" else "unanswered"
        why = over.model_copy(update={"kind": decision})
        await ctx.emit(DelegationEstimated(decision=decision, cause=why, **figures))
        return self._not_launched(started, results, figures, why)

    async def _wait_for(self, confirm: Confirm, question: Question) -> Answer | None:
        """The user's answer (``unanswered`` after ``question.seconds``), or None when Stop came first. The wait is
        not counted in the run's time: the agents' time budget, and the main model's, are what they were."""
        ctx = self.ctx
        began = time.monotonic()
        asked = asyncio.ensure_future(asyncio.wait_for(confirm(question), question.seconds))
        try:
            await ctx.cancel.race(asked)
        finally:
            if not asked.done():
                asked.cancel()
                await asyncio.wait([asked])
            ctx.started += time.monotonic() - began
        if ctx.cancel.cancelled or asked.cancelled():
            return None
        if isinstance(asked.exception(), TimeoutError):
            return "unanswered"
        return asked.result()

    def _not_launched(
        self,
        started: list[Started],
        results: list[dict[str, Any] | None],
        figures: dict[str, Any],
        cause: Cause,
    ) -> ToolOutcome:
        """What the main model reads of a delegation that was not launched: why, with both estimates and the cap."""
        if cause.code == "delegation_cap" and cause.kind == "declined":
            why = "The user chose to have you answer without these agents."
        elif cause.code == "delegation_cap" and cause.kind == "unanswered":
            why = "The user did not answer the confirmation in time: answer without these agents."
        elif cause.code == "delegation_cap":
            why = "It is over the cap on what a delegation may cost."
        else:
            why = f"The run was stopped ({cause.english()})."
        said = (
            f"Not launched: this delegation could cost up to {figures['estimate_max_eur']:.4f} EUR "
            f"(expected {figures['estimate_eur']:.4f} EUR)"
            + (f", over the cap of {figures['cap_eur']:.4f} EUR" if figures["cap_eur"] is not None else "")
            + f". {why} Answer without agents, or delegate fewer tasks, with fewer rounds or a cheaper model."
        )
        for i, _agent_id, _task, _budget in started:
            results[i] = {"task": i + 1, "error": "Not launched (see delegation)."}
        delegation = {
            "launched": False,
            "estimate_eur": figures["estimate_eur"],
            "estimate_max_eur": figures["estimate_max_eur"],
            "cap_eur": figures["cap_eur"],
            "cause": cause.model_dump(exclude_none=True),
            "message": said,
        }
        content = json.dumps({"agents": results, "delegation": delegation}, ensure_ascii=False)
        return ToolOutcome(content, error=said)
