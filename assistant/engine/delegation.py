"""Delegation: the ``agents`` tool and the sub-agent loop.

Each agent gets a fresh context (its system prompt, its tools, its instruction and its scope, and
nothing else), read-only tools over exactly its resources, and a budget of calls, tokens and
seconds checked before each call. Its last allowed call is a forced landing: only the result tool
may be called. It ends by calling ``submit_result``, validated by ``AgentReport``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from .catalogue import ModelInfo
from .compaction import compact
from .errors import BudgetExceeded, ModelError, ModelTimeout
from .events import Action, AgentAction, AgentFinished, AgentStarted, AgentStatus, RoundStarted, Source, keep_sources
from .models.function import prompt_tokens
from .policy import RESOURCE_KINDS, AgentProfile, Plan, resource_kind
from .runtime import RunContext
from .tools import Scope, Tool, ToolRun, run_tool_call
from .types import Effort, Message, ModelRequest, NamedTool, ToolCall, ToolSpec
from .usage import AgentBudget, AgentCounter, RunUsage

AGENTS_TOOL = "agents"
RESULT_TOOL = "submit_result"
MAX_TASKS_PER_CALL = 4
REPORT_PREVIEW_CHARS = 2_000

AGENT_SYSTEM_PROMPT = """You are a research agent. You work alone on one instruction, with read-only tools over the resources listed as your scope, and nothing else.
- Search, then read every relevant document in one call (several ids at once) rather than one per turn.
- Report facts as they are in the documents, with the ids of the documents they come from. Do not guess; say what you could not establish.
- You cannot write, modify, send or store anything. You cannot delegate.
- Finish by calling submit_result with your findings, the sources you read and the gaps that remain."""

LANDING_NOTICE = (
    "This is your last turn: your other tools are withdrawn. Call submit_result now with what you "
    "have established so far, and list as gaps what you could not check."
)
NOT_AVAILABLE_TO_AGENT = (
    "You only have read-only tools over your scope: you cannot write, modify or send anything, nor delegate. "
    "Return what you found with submit_result."
)
NOTE_FOR_PARTIAL = (
    "This agent did not finish: its report is partial. Do not fill the gaps yourself; say what is missing, "
    "or relaunch an agent with a more precise instruction."
)


class AgentReport(BaseModel):
    """The arguments of ``submit_result``."""

    findings: str = Field(
        min_length=1, description="What you established, with the ids of the documents it comes from."
    )
    sources: list[str] = Field(default_factory=list, description="Ids or addresses of what you read.")
    gaps: list[str] = Field(default_factory=list, description="What you could not establish or check.")

    def as_text(self) -> str:
        text = self.findings.strip()
        if self.sources:
            text += "\n\nSources: " + ", ".join(self.sources)
        if self.gaps:
            text += "\n\nGaps: " + "; ".join(self.gaps)
        return text


RESULT_SPEC = ToolSpec(
    name=RESULT_TOOL,
    description="End your work: return your findings, the sources you read and the gaps that remain.",
    parameters=AgentReport.model_json_schema(),
)


@dataclass(frozen=True, slots=True)
class AgentTask:
    """One task of an ``agents`` call, checked: who does what, over which resources, for how long."""

    instruction: str
    model: ModelInfo
    resources: tuple[str, ...]
    max_rounds: int
    profile: AgentProfile | None = None


@dataclass(slots=True)
class AgentOutcome:
    """What an agent came back with, whatever its status."""

    agent_id: str
    task: AgentTask
    status: AgentStatus
    reason: str
    rounds: int
    seconds: float
    usage: RunUsage
    report: str
    tools_run: list[str]
    sources: list[Source]
    forced_landing: bool = False

    def for_main_model(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "agent": self.agent_id,
            "model": self.task.model.id,
            "status": self.status,
            "rounds": self.rounds,
            "report": self.report,
            "documents_read": [f"{s.id} ({s.title})" for s in self.sources],
        }
        if self.status != "ok":
            data["reason"] = self.reason
            data["tools_run"] = self.tools_run
            data["note"] = NOTE_FOR_PARTIAL
        return data


@dataclass(slots=True)
class _Record:
    """What an agent did, kept so that nothing it found is lost when it ends without a result."""

    tools_run: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, Source] = field(default_factory=dict)

    def add(self, run: ToolRun) -> None:
        self.tools_run.append(run.call.name)
        if run.outcome is None:
            return
        action = run.outcome.action
        keep_sources(self.sources, run.outcome.sources)
        if action is not None and action.kind == "search":
            try:
                hits = json.loads(run.content).get("hits", [])
                titles = ", ".join(f"{h['id']} {h['title']}" for h in hits[:5])
            except (ValueError, AttributeError, KeyError, TypeError):
                titles = ""
            self.notes.append(f"Searched {action.label!r}: {action.count} results. {titles}".strip())
        elif action is not None and action.kind == "read":
            try:
                docs = json.loads(run.content).get("documents", [])
            except (ValueError, AttributeError):
                docs = []
            for d in docs:
                excerpt = " ".join(str(d.get("text", "")).split())[:400]
                self.notes.append(f"Read {d.get('id')} ({d.get('title')}): {excerpt}")
        elif action is not None:
            self.notes.append(f"{action.tool}: {action.label}")

    def partial_report(self, headline: str, texts: list[str]) -> str:
        lines = [headline]
        lines += [t.strip() for t in texts if t.strip()]
        if self.notes:
            lines.append("What it had done and read:")
            lines += [f"- {n}" for n in self.notes]
        else:
            lines.append("It had not run any tool yet.")
        return "\n".join(lines)


def agent_first_message(task: AgentTask, scope: Scope, tools: Iterable[str]) -> str:
    """The agent's instruction and its scope: the whole of what it knows about the request."""
    parts = [f"Instruction:\n{task.instruction.strip()}", "Your scope:"]
    parts += [f"- knowledge base {kb}" for kb in scope.knowledge_bases]
    names = set(tools)
    web = [t for t in ("web_search", "web_fetch") if t in names]
    if scope.web and web:
        parts.append(f"- the web ({', '.join(web)})")
    if scope.code and "run_code" in names:
        parts.append("- Python code (run_code), reading only your own knowledge bases")
    return "\n".join(parts)


async def run_agent(
    ctx: RunContext, agent_id: str, task: AgentTask, budget: AgentBudget, effort: Effort | None
) -> AgentOutcome:
    """Run one sub-agent to its end; never raises for a model or tool failure (it becomes a status)."""
    scope = Scope.from_resources(task.resources)
    tools: dict[str, Tool] = {t.spec.name: t for t in ctx.toolbox.tools_for(scope) if t.read_only}
    specs = (*(t.spec for t in tools.values()), RESULT_SPEC)
    spec_tokens = prompt_tokens(ModelRequest(messages=(), tools=specs))
    system = AGENT_SYSTEM_PROMPT
    if task.profile is not None:
        system += f"\n\nProfile «{task.profile.name}»:\n{task.profile.instructions.strip()}"
    messages: list[Message] = [Message.system(system), Message.user(agent_first_message(task, scope, tools))]
    counter = AgentCounter(budget)
    usage = RunUsage()
    record = _Record()
    texts: list[str] = []
    started = time.monotonic()
    extra_calls = 0
    corrected = relaunched = forced = False
    info = task.model
    reasoning = info.effort_for(effort)
    cap = info.output_cap_for(4_000, reasoning)

    await ctx.emit(
        AgentStarted(
            agent_id=agent_id,
            instruction=task.instruction,
            model=info.id,
            model_label=info.label,
            resources=task.resources,
            profile=task.profile.name if task.profile else None,
            max_rounds=budget.max_calls,
        )
    )

    async def finish(status: AgentStatus, reason: str = "", report: str | None = None) -> AgentOutcome:
        if report is None:
            headline = {
                # The stop reasons read as sentences already ("stopped on request", "stopped: ...").
                "stopped": f"{reason[:1].upper()}{reason[1:]}; no report was written."
                if reason.startswith("stopped")
                else f"Stopped ({reason}); no report was written.",
                "interrupted": f"Interrupted ({reason}) before its report.",
                "error": f"Failed: {reason}.",
                "ok": "",
            }[status]
            report = record.partial_report(headline, texts)
        outcome = AgentOutcome(
            agent_id=agent_id,
            task=task,
            status=status,
            reason=reason,
            rounds=counter.calls,
            seconds=round(time.monotonic() - started, 3),
            usage=usage,
            report=report,
            tools_run=record.tools_run,
            sources=list(record.sources.values()),
            forced_landing=forced,
        )
        await ctx.emit(
            AgentFinished(
                agent_id=agent_id,
                model=info.id,
                status=status,
                reason=reason,
                rounds=outcome.rounds,
                seconds=outcome.seconds,
                cost_eur=usage.cost_eur,
                usage=usage.as_data(),
                report=report,
                tools_run=tuple(record.tools_run),
                sources=tuple(outcome.sources),
                forced_landing=forced,
            )
        )
        return outcome

    landing: str | None = None
    while True:
        if ctx.cancel.cancelled:
            return await finish("stopped", ctx.cancel.message)
        if extra_calls:
            extra_calls -= 1
        else:
            try:
                counter.check_before_call()
            except BudgetExceeded as e:
                return await finish("interrupted", e.reason)
            landing = counter.landing_reason()
        if landing and not forced:
            forced = True
            messages.append(Message.user(LANDING_NOTICE))
        compact(messages, info.context_window, reserve=cap + spec_tokens)
        request = ModelRequest(
            messages=tuple(messages),
            tools=specs,
            tool_choice=NamedTool(RESULT_TOOL) if forced else "required",
            parallel_tool_calls=True,
            max_output_tokens=cap,
            reasoning_effort=reasoning,
        )
        await ctx.emit(RoundStarted(agent_id=agent_id, round=counter.calls + 1, model=info.id, forced=forced))
        call_started = time.monotonic()
        try:
            response = await ctx.call_model(
                info.id, request, agent_id=agent_id, timeout=counter.call_timeout(), usage=usage
            )
        except ModelTimeout as e:
            counter.after_call(None, time.monotonic() - call_started)
            return await finish("interrupted", f"time budget reached: {e}")
        except ModelError as e:
            counter.after_call(None, time.monotonic() - call_started)
            return await finish("error", f"the model call failed ({e})")
        counter.after_call(response.usage, time.monotonic() - call_started)
        if response.finish_reason == "cancelled":  # a category budget refused the reservation
            return await finish("stopped", ctx.cancel.message)
        if response.text.strip():
            texts.append(response.text)
        messages.append(response.as_message())

        result_call = next((c for c in response.tool_calls if c.name == RESULT_TOOL), None)
        others = [c for c in response.tool_calls if c.name != RESULT_TOOL]
        if result_call is not None:
            try:
                report = AgentReport.model_validate(result_call.parsed_arguments())
            except (ValueError, ValidationError) as e:
                if corrected:
                    return await finish("error", f"its result was invalid twice ({_brief(e)})")
                corrected = True
                extra_calls = 1 if forced else 0
                messages += _not_run(others, "Not run: submit_result was called in the same turn.")
                messages.append(
                    Message.tool(
                        result_call,
                        json.dumps({"error": f"Invalid result: {_brief(e)}. Correct it and call submit_result again."}),
                    )
                )
                continue
            status: AgentStatus = "interrupted" if forced else "ok"
            if response.finish_reason == "length":
                status, landing = "interrupted", "output cut at the token cap"
            return await finish(status, landing or "", report.as_text())

        if forced:
            # The forced call returned no result: relaunch once, then give up with the partial record.
            if relaunched:
                return await finish("error", "it returned no result after the forced landing, even when relaunched")
            relaunched = True
            extra_calls = 1
            messages += _not_run(others, "Not run: only submit_result is allowed on the last turn.")
            continue
        if response.finish_reason == "length" and not response.tool_calls:
            return await finish("interrupted", "output cut at the token cap")
        if not others:
            messages.append(Message.user("Call a tool: search or read, or submit_result to finish."))
            continue
        if ctx.cancel.cancelled:
            messages += _not_run(others, "Not run: stopped on request.")
            return await finish("stopped", ctx.cancel.message)

        try:
            # Every call of the turn finishes before an unexpected failure ends this agent (not the run).
            results = await asyncio.gather(
                *(run_tool_call(tools, c, NOT_AVAILABLE_TO_AGENT) for c in others), return_exceptions=True
            )
            failure = next((r for r in results if isinstance(r, BaseException)), None)
            if failure is not None:
                for r in results:
                    if isinstance(r, ToolRun):
                        record.add(r)
                raise failure
            runs = [r for r in results if isinstance(r, ToolRun)]
        except Exception as e:  # an unexpected tool failure ends this agent, not the run
            return await finish("error", f"a tool failed ({type(e).__name__}: {e})")
        for run in runs:
            record.add(run)
            messages.append(Message.tool(run.call, run.content))
            action = (
                run.outcome.action
                if run.outcome and run.outcome.action
                else Action(tool=run.call.name, kind="other", label=run.error or run.call.name, ok=run.ok)
            )
            if not run.ok:
                action = action.model_copy(update={"ok": False, "label": f"{run.call.name}: {run.error}"})
            sources = run.outcome.sources if run.outcome else ()
            await ctx.emit(AgentAction(agent_id=agent_id, action=action, sources=sources))


def _not_run(calls: list[ToolCall], why: str) -> list[Message]:
    return [Message.tool(c, json.dumps({"error": why})) for c in calls]


def _profile_line(profile: AgentProfile) -> str:
    kinds = ", ".join(k for k in RESOURCE_KINDS if k in profile.tools)
    model = f"; default model {profile.default_model}" if profile.default_model else ""
    return f"{profile.name} (receives: {kinds}{model})"


def _brief(e: Exception) -> str:
    if isinstance(e, ValidationError):
        return "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors()[:3])
    return str(e)


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
        task_properties: dict[str, Any] = {
            "instruction": {"type": "string", "description": "What the agent must find, written for it."},
            "model": {"type": "string", "enum": [m.id for m in self.models]},
            "resources": {
                "type": "array",
                "items": {"type": "string", "enum": list(self.resources)},
                "minItems": 1,
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

    def _check(self, raw: Any) -> AgentTask | str:
        """A task checked against the request and the policy, or the reason it is refused."""
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
        if not isinstance(resources, list) or not resources:
            return "The task needs resources: a non-empty subset of " + ", ".join(self.resources) + "."
        outside = [str(r) for r in resources if str(r) not in self.resources]
        if outside:
            return (
                f"Resource(s) {', '.join(outside)} are not part of this request and cannot be given to an agent. "
                f"Available: {', '.join(self.resources)}."
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
        return AgentTask(
            instruction=instruction,
            model=catalogue[model_id],
            resources=tuple(dict.fromkeys(str(r) for r in resources)),
            max_rounds=rounds,
            profile=profile,
        )

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
        for i, raw in enumerate(tasks_raw):
            if i >= MAX_TASKS_PER_CALL:
                results[i] = {
                    "task": i + 1,
                    "error": f"Refused: at most {MAX_TASKS_PER_CALL} tasks per call. Call again once these agents are back.",
                }
                continue
            checked = self._check(raw)
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
                max_calls=task.max_rounds,
                max_tokens=ctx.policy.agent_max_tokens,
                max_seconds=seconds,
                call_timeout=ctx.policy.agent_call_timeout,
            )
            started.append((i, asyncio.ensure_future(self._run_one(f"agent-{ctx.agents_started}", task, budget))))
        outcomes: list[AgentOutcome] = []
        for i, future in started:
            outcome = await future
            outcomes.append(outcome)
            ctx.add_sources(tuple(outcome.sources))
            results[i] = {"task": i + 1, **outcome.for_main_model()}
        return json.dumps({"agents": results}, ensure_ascii=False), outcomes

    async def _run_one(self, agent_id: str, task: AgentTask, budget: AgentBudget) -> AgentOutcome:
        try:
            # The level's effort, translated for the agent's own model (not the main model's translation).
            return await run_agent(self.ctx, agent_id, task, budget, self.plan.level_effort)
        finally:
            self.ctx.active_agents -= 1
