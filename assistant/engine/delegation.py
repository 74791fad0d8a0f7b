"""Delegation: the ``agents`` tool of one run, its arguments' model (and so its spec) and the checks of its tasks.

The main model asks for 1 to 4 tasks in one call; their arguments are a pydantic model built for the run
(``agents_arguments``: the models, resources and profiles it may name, the round budget of its level, which no task
may exceed: a larger ``max_rounds`` is clamped to it, and its agent's step says so), from
which the tool's JSON schema is derived and by which each task is validated; each valid task is then checked
against the request and the policy (model, resources, profile, documents, its context window), and the accepted
ones run concurrently, each as an agent (``agent.run_agent``) with its own budget. What the main model reads
back is every agent's outcome, or the reason its task was refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import time
import uuid
from typing import Any, ClassVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .agent import context_refusal, first_request, run_agent
from .catalogue import ModelInfo
from .causes import Cause
from .errors import ToolError
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
from .events import ChosenDocument, Decision, DelegationEstimated
from .outcomes import AgentOutcome, AgentTask
from .policy import RESOURCE_KINDS, AgentProfile, Plan, resource_kind
from .runtime import RunContext
from .scope import parse_document
from .tokens import prompt_tokens
from .tools import Document, Tool, ToolOutcome
from .types import ToolCall, ToolSpec
from .usage import AgentBudget

log = logging.getLogger(__name__)

AGENTS_TOOL = "agents"
MAX_TASKS_PER_CALL = 4
MAX_DOCUMENTS_PER_TASK = 20
REFUSED = "task_refused"  # the type of a validation error whose message is said as it is, without its place


def _profile_line(profile: AgentProfile) -> str:
    kinds = ", ".join(k for k in RESOURCE_KINDS if k in profile.tools)
    model = f"; default model {profile.default_model}" if profile.default_model else ""
    return f"{profile.name} (receives: {kinds}{model})"


REQUIRED = ("instruction", "model", "resources")  # in the schema; checked with our own sentences when missing


def _task_schema(schema: dict[str, Any], cls: type) -> None:
    """A task's schema as the main model reads it: the fields it must give required, those of no use to this run
    (``hidden``: profiles when the organisation has none, documents without knowledge bases) left out."""
    properties = schema.get("properties", {})
    for name in getattr(cls, "hidden", ()):
        properties.pop(name, None)
    for name in REQUIRED:
        properties.get(name, {}).pop("default", None)
    schema["required"] = list(REQUIRED)


class TaskArguments(BaseModel):
    """One task of an ``agents`` call, as the main model writes it (``agents_arguments`` narrows it for a run)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=_task_schema)
    hidden: ClassVar[frozenset[str]] = frozenset()

    instruction: str = Field("", description="What the agent must find, written for it.", validate_default=True)
    model: str = ""
    resources: list[str] = Field(
        default_factory=list, description="The resources this agent may read (a subset of yours)."
    )
    max_rounds: int = Field(5, ge=1)
    profile: str = ""
    documents: list[str] = Field(default_factory=list, max_length=MAX_DOCUMENTS_PER_TASK)

    _rounds_asked: int | None = PrivateAttr(None)
    """The ``max_rounds`` the main model asked, when more than the level allows (it got the level's budget)."""

    @model_validator(mode="wrap")
    @classmethod
    def _asked(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        task = handler(data)
        raw = data.get("max_rounds") if isinstance(data, dict) else None
        if isinstance(raw, str) and raw.strip().isdigit():
            raw = int(raw)
        if isinstance(raw, int | float) and not isinstance(raw, bool) and int(raw) > task.max_rounds:
            task._rounds_asked = int(raw)
        return task

    @property
    def rounds_asked(self) -> int | None:
        return self._rounds_asked

    @field_validator("instruction", mode="after")
    @classmethod
    def _instruction(cls, value: str) -> str:
        if not value.strip():
            raise PydanticCustomError(REFUSED, "The task has no instruction.")
        return value.strip()

    @field_validator("resources", mode="before")
    @classmethod
    def _resources(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [value]
        return [] if value is None else value

    @field_validator("documents", mode="before")
    @classmethod
    def _documents(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(i, str) and i.strip() for i in value):
            raise PydanticCustomError(REFUSED, "documents must be a list of document ids (as kb_search returns them).")
        return list(dict.fromkeys(i.strip() for i in value))


class AgentsArguments(BaseModel):
    """The arguments of an ``agents`` call."""

    tasks: list[TaskArguments] = Field(min_length=1)


@functools.lru_cache(maxsize=256)
def agents_arguments(
    models: tuple[str, ...],
    resources: tuple[str, ...],
    profiles: tuple[str, ...],
    rounds: int,
    documents: bool,
) -> type[AgentsArguments]:
    """The ``agents`` tool's arguments for one run: the models it may name (``models``), its ``resources``, its
    agent ``profiles``, the round budget of its level (``rounds``: each agent's by default, and the most a task may
    ask: an admin's level binds, whatever the main model asks), ``documents`` when it has knowledge bases to choose
    them in. The JSON schema the main model reads is this model's; a task over the budget is given the budget (its
    ``rounds_asked`` says what it asked)."""
    fields: dict[str, Any] = {
        "model": (str, Field("", json_schema_extra={"enum": list(models)})),
        "resources": (
            list[str],
            Field(
                default_factory=list,
                description="The resources this agent may read (a subset of yours).",
                json_schema_extra={"items": {"type": "string", "enum": list(resources)}},
            ),
        ),
        "max_rounds": (
            int,
            Field(
                rounds,
                ge=1,
                le=rounds,
                description=f"Tool rounds for this agent: at most {rounds}, the level's budget (the default).",
            ),
        ),
    }
    if profiles:
        fields["profile"] = (str, Field("", json_schema_extra={"enum": list(profiles)}))
    task = create_model(
        "AgentTaskArguments",
        __base__=TaskArguments,
        __validators__={"_ceiling": field_validator("max_rounds", mode="before")(_clamp(rounds))},
        **fields,
    )
    task.hidden = frozenset(({"profile"} if not profiles else set()) | ({"documents"} if not documents else set()))
    return create_model(
        "AgentsArguments",
        __base__=AgentsArguments,
        tasks=(list[task], Field(min_length=1, json_schema_extra={"maxItems": MAX_TASKS_PER_CALL})),  # type: ignore[valid-type]  # task: a class made by create_model at runtime, a variable to mypy
    )


def _clamp(rounds: int) -> Any:
    def clamp(cls: type[BaseModel], value: Any) -> Any:
        if value is None:
            return rounds
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return max(1, min(int(value), rounds))
        return value

    return classmethod(clamp)


@functools.lru_cache(maxsize=256)
def parameters(arguments: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema as a tool's parameters: its definitions inlined, its titles left out (once per model:
    ``agents_arguments`` keeps its models; the schema is not changed by its readers)."""
    schema = arguments.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[1]])
            return {k: inline(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    inlined: dict[str, Any] = inline(schema)  # the schema is a dict, so is its copy
    return inlined


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

    def _validated(self, raw: list[Any]) -> list[TaskArguments | str]:
        """Each task's arguments validated by the run's model, or why they are refused (said to the main model)."""
        try:
            call = self.arguments.model_validate({"tasks": raw})
        except ValidationError:
            pass
        else:
            return list(call.tasks)
        task_model = get_args(self.arguments.model_fields["tasks"].annotation)[0]  # list[the run's task model]
        out: list[TaskArguments | str] = []
        for item in raw:
            if not isinstance(item, dict):
                out.append("Each task must be an object with instruction, model and resources.")
                continue
            try:
                out.append(task_model.model_validate(item))
            except ValidationError as e:
                out.append(_refusal(e))
        return out

    def _check(self, args: TaskArguments, found: dict[str, Document]) -> AgentTask | str:
        """A valid task checked against the request and the policy, or the reason it is refused.

        ``found`` holds the documents the call's tasks name, as the knowledge backend read them.
        """
        policy, catalogue = self.ctx.policy, self.ctx.catalogue
        profile = policy.profiles.get(args.profile) if args.profile else None
        if args.profile and profile is None:
            return f"Unknown agent profile '{args.profile}'. Profiles: {', '.join(policy.profiles) or 'none'}."
        model_id = args.model or (profile.default_model if profile else "") or ""
        allowed = [m.id for m in self.models]
        if model_id not in allowed:
            if model_id in catalogue and not policy.allows(model_id):
                return (
                    f"The model '{model_id}' is not allowed in this organisation. Choose one of: {', '.join(allowed)}."
                )
            return f"The model '{model_id}' cannot run agents here (allowed models at least twice cheaper than {self.main_model.id}): choose one of {', '.join(allowed)}."
        resources = list(args.resources)
        documents = self._documents(args.documents, found)
        if isinstance(documents, str):
            return documents
        if not (resources or documents):
            return "The task needs resources: a non-empty subset of " + ", ".join(self.resources) + "."
        outside = [r for r in resources if r not in self.resources]
        if outside:
            return (
                f"Resource(s) {', '.join(outside)} are not part of this request and cannot be given to an agent. "
                f"Available: {', '.join(self.resources)}."
            )
        if documents:
            # Chosen documents are the agent's whole knowledge: no base, nor other document, besides them.
            resources = [r for r in resources if resource_kind(r) != "kb"] + [d.resource for d in documents]
        else:  # the request's own chosen documents, handed on as resources: their titles for the line
            documents = tuple(
                ChosenDocument(id=doc.id, kb=doc.kb, title=doc.title)
                for r in resources
                if (chosen := parse_document(r)) is not None
                and (doc := found.get(chosen[1])) is not None
                and doc.kb == chosen[0]
            )
        if profile is not None:
            barred = [r for r in resources if resource_kind(r) not in profile.tools]
            if barred:
                kinds = ", ".join(k for k in RESOURCE_KINDS if k in profile.tools) or "none"
                return (
                    f"The agent profile '{profile.name}' may only receive these kinds of resources: {kinds}; "
                    f"{', '.join(barred)} cannot be given to it."
                )
        task = AgentTask(
            instruction=args.instruction,
            model=catalogue[model_id],
            resources=tuple(dict.fromkeys(resources)),
            max_rounds=args.max_rounds,
            rounds_asked=args.rounds_asked,
            profile=profile,
            documents=documents,
        )
        return context_refusal(self.ctx, task, self.plan.level_effort) or task

    def _documents(self, ids: list[str], found: dict[str, Document]) -> tuple[ChosenDocument, ...] | str:
        """A task's chosen documents, each one of this request's, or the reason they are refused."""
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

    async def _found(self, tasks: list[TaskArguments | str]) -> dict[str, Document]:
        """The documents the tasks name, read once for the whole call (none without a knowledge backend)."""
        ids: set[str] = set()
        for t in tasks:
            if isinstance(t, str):
                continue
            ids.update(t.documents)
            ids.update(chosen[1] for r in t.resources if (chosen := parse_document(r)) is not None)
        knowledge = self.ctx.toolbox.knowledge
        if not ids or knowledge is None:
            return {}
        return await knowledge.read(sorted(ids))

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
        validated = self._validated(raw[:MAX_TASKS_PER_CALL])
        found = await self._found(validated)
        runnable: list[tuple[int, AgentTask]] = []
        for i, task_args in enumerate(validated):
            checked = task_args if isinstance(task_args, str) else self._check(task_args, found)
            if isinstance(checked, str):
                results[i] = {"task": i + 1, "error": checked}
            else:
                runnable.append((i, checked))
        ctx = self.ctx
        seconds = ctx.seconds_left - ctx.policy.conclude_reserve_seconds
        started: list[tuple[int, str, AgentTask, AgentBudget]] = []
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
            launched = await self._cost_check(call_id, started, results)
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

    async def _estimate(self, started: list[tuple[int, str, AgentTask, AgentBudget]]) -> DelegationEstimate:
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

    async def _cost_check(
        self,
        call_id: str,
        started: list[tuple[int, str, AgentTask, AgentBudget]],
        results: list[dict[str, Any] | None],
    ) -> list[tuple[int, str, AgentTask, AgentBudget]] | ToolOutcome:
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
        started: list[tuple[int, str, AgentTask, AgentBudget]],
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

    async def _run_one(self, agent_id: str, task: AgentTask, budget: AgentBudget, call_id: str) -> AgentOutcome:
        try:
            # The level's effort, translated for the agent's own model (not the main model's translation).
            return await run_agent(self.ctx, agent_id, task, budget, self.plan.level_effort, call_id)
        finally:
            self.ctx.active_agents -= 1


def _refusal(e: ValidationError) -> str:
    """Why a task's arguments are refused: our own sentences as they are, pydantic's with the field they concern."""
    said = []
    for error in e.errors()[:3]:
        if error["type"] == REFUSED:
            said.append(error["msg"])
        else:
            said.append(f"{'.'.join(map(str, error['loc'])) or 'task'}: {error['msg']}")
    return "; ".join(said)
