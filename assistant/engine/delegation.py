"""Delegation: the ``agents`` tool of one run, its arguments' model (and so its spec) and the checks of its tasks.

The main model asks for 1 to 4 tasks in one call; their arguments are a pydantic model built for the run
(``agents_arguments``: the models, resources and profiles it may name, the round budget of its level, which no task
may exceed: a larger ``max_rounds`` is clamped to it, and its agent's step says so), from
which the tool's JSON schema is derived and by which each task is validated; each valid task is then checked
against the request and the policy (model, resources, profile, documents, its context window), and the accepted
ones run concurrently, each as an agent (``agent.run_agent``) with its own budget. What the main model reads
back is every agent's outcome, or the reason its task was refused.

Here: the tool (its spec, the fan-out of a call's tasks, what the main model reads back). Its arguments:
``delegation_arguments``; each task's checks: ``delegation_checks``; what it may cost before launch: ``delegation_cost``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .agent import run_agent
from .catalogue import ModelInfo
from .delegation_arguments import MAX_TASKS_PER_CALL, agents_arguments, parameters, validated_tasks
from .delegation_checks import TaskChecks
from .delegation_cost import CostCheck, Started
from .errors import ToolError
from .outcomes import AgentOutcome, AgentTask
from .policy import RESOURCE_KINDS, AgentProfile, Plan
from .runtime import RunContext
from .tools import Tool, ToolOutcome
from .types import ToolCall, ToolSpec
from .usage import AgentBudget

AGENTS_TOOL = "agents"


def _profile_line(profile: AgentProfile) -> str:
    kinds = ", ".join(k for k in RESOURCE_KINDS if k in profile.tools)
    model = f"; default model {profile.default_model}" if profile.default_model else ""
    return f"{profile.name} (receives: {kinds}{model})"


class Delegation(Tool):
    """The ``agents`` tool of one run: its spec for the main model, and running 1–4 tasks in parallel.

    Stop does not cancel it (``stops_itself``): its agents stop and report what they had. Its ``outcomes`` are
    every agent's it ran, in order."""

    read_only = False  # agents cannot delegate
    stops_itself = True

    def __init__(self, ctx: RunContext, plan: Plan, main_model: ModelInfo) -> None:
        self.ctx = ctx
        self.plan = plan
        self.main_model = main_model
        self.models = ctx.catalogue.cheaper_than(
            main_model.id, ctx.policy.allowed_ids(ctx.catalogue), ctx.policy.cheaper_factor
        )
        self.resources = plan.scope.resources
        self.checks = TaskChecks(ctx, plan, main_model, self.models)
        self.cost = CostCheck(ctx, plan)
        self.arguments = agents_arguments(
            tuple(m.id for m in self.models),
            tuple(self.resources),
            tuple(ctx.policy.profiles),
            plan.agent_rounds,
            bool(plan.scope.searchable),
        )
        self.outcomes: list[AgentOutcome] = []
        self._spec: ToolSpec | None = None

    @property
    def spec(self) -> ToolSpec:
        if self._spec is None:
            self._spec = ToolSpec(
                name=AGENTS_TOOL, description=self._description(), parameters=parameters(self.arguments)
            )
        return self._spec

    def _description(self) -> str:
        prices = "; ".join(
            f"{m.id} ({m.label}): {m.input_price:g} EUR in / {m.output_price:g} EUR out per million tokens"
            for m in self.models
        )
        main = self.main_model
        description = (
            "Delegate work to agents: each is a fresh model with its own empty context and read-only tools "
            "over the resources you give it, that returns a report. Measured facts: delegating costs in itself "
            "(a fresh context and its bootstrap tokens, paid without cache; at the same model, splitting a request "
            "into agents costs 1.5 to 2 times one loop, for the same accuracy); the gain comes from a cheaper model "
            "(a much cheaper model doing the searches gives the same accuracy for about 85% less); an agent does not "
            "see the original question, so it is not biased by it. "
            "Delegate only to hand work to a cheaper model, to isolate a verification, or to cover several "
            "independent resources in parallel. Answer a simple question yourself. "
            f"Up to {MAX_TASKS_PER_CALL} tasks per call run in parallel. Write each instruction for the agent: it "
            "knows nothing but the instruction and its resources. "
            f"You are {main.id} ({main.input_price:g} EUR in / {main.output_price:g} EUR out per million tokens). "
            f"Models for agents: {prices}."
        )
        if self.ctx.policy.profiles:
            lines = "; ".join(_profile_line(p) for p in self.ctx.policy.profiles.values())
            description += f" Agent profiles (optional): {lines}."
        if self.plan.scope.searchable:
            description += " A task may name documents (ids seen in kb_search results): its agent reads only those."
        return description

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        return await self.run_call(ToolCall(id="", name=AGENTS_TOOL, arguments=""), args)

    async def run_call(self, call: ToolCall, args: dict[str, Any]) -> ToolOutcome:
        """Run the tasks of one call concurrently: what the main model reads is every task's outcome or refusal. Its
        agents name ``call`` as the one that started them."""
        call_id = call.id
        raw = args.get("tasks")
        if not isinstance(raw, list) or not raw:
            raise ToolError("'tasks' must be a list of 1 to 4 tasks.")
        results: list[dict[str, Any] | None] = [None] * len(raw)
        for i in range(MAX_TASKS_PER_CALL, len(raw)):
            results[i] = {
                "task": i + 1,
                "error": f"Refused: at most {MAX_TASKS_PER_CALL} tasks per call. Call again once these agents are back.",
            }
        validated = validated_tasks(self.arguments, raw[:MAX_TASKS_PER_CALL])
        found = await self.checks.found(validated)
        runnable: list[tuple[int, AgentTask]] = []
        for i, task_args in enumerate(validated):
            checked = task_args if isinstance(task_args, str) else self.checks.check(task_args, found)
            if isinstance(checked, str):
                results[i] = {"task": i + 1, "error": checked}
            else:
                runnable.append((i, checked))
        ctx = self.ctx
        seconds = ctx.seconds_left - ctx.policy.conclude_reserve_seconds
        started: list[Started] = []
        for i, task in runnable:
            if ctx.active_agents >= ctx.policy.max_parallel_agents:
                results[i] = {
                    "task": i + 1,
                    "error": f"Refused: at most {ctx.policy.max_parallel_agents} agents run at once.",
                }
                continue
            if seconds <= 1 or ctx.cancel.cancelled:
                results[i] = {"task": i + 1, "error": "Refused: no time is left in this request for an agent."}
                continue
            ctx.active_agents += 1
            ctx.agents_started += 1
            budget = AgentBudget(
                max_rounds=task.max_rounds,
                max_tokens=ctx.policy.agent_max_tokens,
                max_seconds=seconds,
                call_timeout=ctx.policy.agent_call_timeout,
            )
            started.append((i, f"agent-{ctx.agents_started}", task, budget))
        if started:
            launched = await self.cost.check(call_id, started, results)
            if isinstance(launched, ToolOutcome):  # not launched: over its cap
                ctx.active_agents -= len(started)
                ctx.agents_started -= len(started)
                return launched
            started = launched
        # Each agent ends on its own (Stop included: it reports what it had); what escapes one (a service the run
        # needs failing) cancels the others and ends the run.
        try:
            async with asyncio.TaskGroup() as group:
                futures = [
                    (i, group.create_task(self._run_one(a, task, budget, call_id))) for i, a, task, budget in started
                ]
        except BaseExceptionGroup as e:
            raise e.exceptions[0]  # noqa: B904  (the others are the cancelled agents')
        outcomes: list[AgentOutcome] = []
        for i, future in futures:
            outcome = future.result()
            outcomes.append(outcome)
            ctx.add_sources(tuple(outcome.sources))
            results[i] = {"task": i + 1, **outcome.for_main_model()}
        self.outcomes += outcomes
        content = json.dumps({"agents": results}, ensure_ascii=False)
        return ToolOutcome(content, error=None if outcomes else "no agent could be started")

    async def _run_one(self, agent_id: str, task: AgentTask, budget: AgentBudget, call_id: str) -> AgentOutcome:
        try:
            # The level's effort, translated for the agent's own model (not the main model's translation).
            return await run_agent(self.ctx, agent_id, task, budget, self.plan.level_effort, call_id)
        finally:
            self.ctx.active_agents -= 1
