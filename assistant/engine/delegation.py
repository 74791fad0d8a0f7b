"""Delegation: the ``agents`` tool of one run, its spec for the main model and the checks of its tasks.

The main model asks for 1 to 4 tasks in one call; each is checked against the request and the
policy (model, resources, profile, rounds) and the accepted ones run concurrently, each as an agent
(``agent.run_agent``) with its own budget. What the main model reads back is every agent's outcome,
or the reason its task was refused.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .agent import context_refusal, run_agent
from .catalogue import ModelInfo
from .events import ChosenDocument
from .outcomes import AgentOutcome, AgentTask
from .policy import RESOURCE_KINDS, AgentProfile, Plan, resource_kind
from .runtime import RunContext
from .scope import parse_document
from .tools import Document
from .types import ToolCall, ToolSpec
from .usage import AgentBudget

AGENTS_TOOL = "agents"
MAX_TASKS_PER_CALL = 4
MAX_DOCUMENTS_PER_TASK = 20


def _profile_line(profile: AgentProfile) -> str:
    kinds = ", ".join(k for k in RESOURCE_KINDS if k in profile.tools)
    model = f"; default model {profile.default_model}" if profile.default_model else ""
    return f"{profile.name} (receives: {kinds}{model})"


class Delegation:
    """The ``agents`` tool of one run: its spec for the main model, and running 1–4 tasks in parallel."""

    def __init__(self, ctx: RunContext, plan: Plan, main_model: ModelInfo) -> None:
        self.ctx = ctx
        self.plan = plan
        self.main_model = main_model
        self.models = ctx.catalogue.cheaper_than(
            main_model.id, ctx.policy.allowed_ids(ctx.catalogue), ctx.policy.cheaper_factor
        )
        self.resources = plan.scope.resources

    @property
    def spec(self) -> ToolSpec:
        prices = "; ".join(
            f"{m.id} ({m.label}): {m.input_price:g} EUR in / {m.output_price:g} EUR out per million tokens"
            for m in self.models
        )
        main = self.main_model
        profiles = list(self.ctx.policy.profiles)
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
        if profiles:
            lines = "; ".join(_profile_line(p) for p in self.ctx.policy.profiles.values())
            description += f" Agent profiles (optional): {lines}."
        if self.plan.scope.searchable:
            description += " A task may name documents (ids seen in kb_search results): its agent reads only those."
        task_properties: dict[str, Any] = {
            "instruction": {"type": "string", "description": "What the agent must find, written for it."},
            "model": {"type": "string", "enum": [m.id for m in self.models]},
            "resources": {
                "type": "array",
                "items": {"type": "string", "enum": list(self.resources)},
                "description": "The resources this agent may read (a subset of yours).",
            },
            "max_rounds": {
                "type": "integer",
                "minimum": 1,
                "maximum": max(self.ctx.policy.max_agent_rounds, self.plan.agent_rounds),
                "description": f"Tool rounds for this agent ({self.plan.agent_rounds} by default).",
            },
        }
        if profiles:
            task_properties["profile"] = {"type": "string", "enum": profiles}
        if self.plan.scope.searchable:
            task_properties["documents"] = {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": MAX_DOCUMENTS_PER_TASK,
            }
        return ToolSpec(
            name=AGENTS_TOOL,
            description=description,
            parameters={
                "type": "object",
                "properties": {
                    "tasks": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_TASKS_PER_CALL,
                        "items": {
                            "type": "object",
                            "properties": task_properties,
                            "required": ["instruction", "model", "resources"],
                        },
                    }
                },
                "required": ["tasks"],
            },
        )

    def _check(self, raw: Any, found: dict[str, Document]) -> AgentTask | str:
        """A task checked against the request and the policy, or the reason it is refused.

        ``found`` holds the documents the call's tasks name, as the knowledge backend read them.
        """
        if not isinstance(raw, dict):
            return "Each task must be an object with instruction, model and resources."
        instruction = str(raw.get("instruction", "")).strip()
        if not instruction:
            return "The task has no instruction."
        policy, catalogue = self.ctx.policy, self.ctx.catalogue
        profile = policy.profiles.get(str(raw["profile"])) if raw.get("profile") else None
        if raw.get("profile") and profile is None:
            return f"Unknown agent profile '{raw['profile']}'. Profiles: {', '.join(policy.profiles) or 'none'}."
        model_id = str(raw.get("model") or (profile.default_model if profile else "") or "")
        allowed = [m.id for m in self.models]
        if model_id not in allowed:
            if model_id in catalogue and not policy.allows(model_id):
                return (
                    f"The model '{model_id}' is not allowed in this organisation. Choose one of: {', '.join(allowed)}."
                )
            return f"The model '{model_id}' cannot run agents here (allowed models at least twice cheaper than {self.main_model.id}): choose one of {', '.join(allowed)}."
        resources = raw.get("resources") or []
        if isinstance(resources, str):
            resources = [resources]
        documents = self._documents(raw.get("documents"), found)
        if isinstance(documents, str):
            return documents
        if not isinstance(resources, list) or not (resources or documents):
            return "The task needs resources: a non-empty subset of " + ", ".join(self.resources) + "."
        outside = [str(r) for r in resources if str(r) not in self.resources]
        if outside:
            return (
                f"Resource(s) {', '.join(outside)} are not part of this request and cannot be given to an agent. "
                f"Available: {', '.join(self.resources)}."
            )
        if documents:
            # Chosen documents are the agent's whole knowledge: no base, nor other document, besides them.
            resources = [r for r in resources if resource_kind(str(r)) != "kb"] + [d.resource for d in documents]
        else:  # the request's own chosen documents, handed on as resources: their titles for the line
            documents = tuple(
                ChosenDocument(id=doc.id, kb=doc.kb, title=doc.title)
                for r in resources
                if (chosen := parse_document(str(r))) is not None
                and (doc := found.get(chosen[1])) is not None
                and doc.kb == chosen[0]
            )
        if profile is not None:
            barred = [str(r) for r in resources if resource_kind(str(r)) not in profile.tools]
            if barred:
                kinds = ", ".join(k for k in RESOURCE_KINDS if k in profile.tools) or "none"
                return (
                    f"The agent profile '{profile.name}' may only receive these kinds of resources: {kinds}; "
                    f"{', '.join(barred)} cannot be given to it."
                )
        rounds = raw.get("max_rounds") or self.plan.agent_rounds
        try:
            rounds = int(rounds)
        except (TypeError, ValueError):
            return "max_rounds must be an integer."
        rounds = max(1, min(rounds, max(policy.max_agent_rounds, self.plan.agent_rounds)))
        task = AgentTask(
            instruction=instruction,
            model=catalogue[model_id],
            resources=tuple(dict.fromkeys(str(r) for r in resources)),
            max_rounds=rounds,
            profile=profile,
            documents=documents,
        )
        return context_refusal(self.ctx, task, self.plan.level_effort) or task

    def _documents(self, raw: Any, found: dict[str, Document]) -> tuple[ChosenDocument, ...] | str:
        """A task's chosen documents, each one of this request's, or the reason they are refused."""
        if raw is None or raw == []:
            return ()
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list) or not all(isinstance(i, str) and i.strip() for i in raw):
            return "documents must be a list of document ids (as kb_search returns them)."
        ids = list(dict.fromkeys(i.strip() for i in raw))
        if len(ids) > MAX_DOCUMENTS_PER_TASK:
            return f"At most {MAX_DOCUMENTS_PER_TASK} documents per task."
        scope = self.plan.scope
        chosen: list[ChosenDocument] = []
        for doc_id in ids:
            doc = found.get(doc_id)
            if doc is None:
                return f"Document '{doc_id}' does not exist: use the ids kb_search returned."
            if not scope.may_read(doc.kb, doc.id):
                return (
                    f"Document '{doc_id}' is not part of this request's knowledge bases "
                    f"({', '.join(r for r in scope.resources if resource_kind(r) == 'kb') or 'none'}) "
                    "and cannot be given to an agent."
                )
            chosen.append(ChosenDocument(id=doc.id, kb=doc.kb, title=doc.title))
        return tuple(chosen)

    async def _found(self, tasks: list[Any]) -> dict[str, Document]:
        """The documents the tasks name, read once for the whole call (none without a knowledge backend)."""
        ids: set[str] = set()
        for t in tasks[:MAX_TASKS_PER_CALL]:
            if not isinstance(t, dict):
                continue
            for key in ("documents", "resources"):
                named = t.get(key)
                for i in [named] if isinstance(named, str) else named if isinstance(named, list) else []:
                    chosen = parse_document(i) if isinstance(i, str) and key == "resources" else None
                    if chosen is not None:
                        ids.add(chosen[1])
                    elif key == "documents" and isinstance(i, str):
                        ids.add(i)
        knowledge = self.ctx.toolbox.knowledge
        if not ids or knowledge is None:
            return {}
        return await knowledge.read(sorted(i.strip() for i in ids))

    async def run(self, call: ToolCall) -> tuple[str, list[AgentOutcome]]:
        """Run the tasks of one call concurrently; return the text the main model reads, and the outcomes."""
        try:
            tasks_raw = call.parsed_arguments().get("tasks")
        except ValueError as e:
            return json.dumps({"error": f"Invalid JSON arguments: {e}"}), []
        if not isinstance(tasks_raw, list) or not tasks_raw:
            return json.dumps({"error": "'tasks' must be a list of 1 to 4 tasks."}), []
        results: list[dict[str, Any] | None] = [None] * len(tasks_raw)
        runnable: list[tuple[int, AgentTask]] = []
        found = await self._found(tasks_raw)
        for i, raw in enumerate(tasks_raw):
            if i >= MAX_TASKS_PER_CALL:
                results[i] = {
                    "task": i + 1,
                    "error": f"Refused: at most {MAX_TASKS_PER_CALL} tasks per call. Call again once these agents are back.",
                }
                continue
            checked = self._check(raw, found)
            if isinstance(checked, str):
                results[i] = {"task": i + 1, "error": checked}
            else:
                runnable.append((i, checked))
        ctx = self.ctx
        seconds = ctx.seconds_left - ctx.policy.conclude_reserve_seconds
        started: list[tuple[int, asyncio.Task[AgentOutcome]]] = []
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
            agent = self._run_one(f"agent-{ctx.agents_started}", task, budget, call.id)
            started.append((i, asyncio.ensure_future(agent)))
        outcomes: list[AgentOutcome] = []
        for i, future in started:
            outcome = await future
            outcomes.append(outcome)
            ctx.add_sources(tuple(outcome.sources))
            results[i] = {"task": i + 1, **outcome.for_main_model()}
        return json.dumps({"agents": results}, ensure_ascii=False), outcomes

    async def _run_one(self, agent_id: str, task: AgentTask, budget: AgentBudget, call_id: str) -> AgentOutcome:
        try:
            # The level's effort, translated for the agent's own model (not the main model's translation).
            return await run_agent(self.ctx, agent_id, task, budget, self.plan.level_effort, call_id)
        finally:
            self.ctx.active_agents -= 1
