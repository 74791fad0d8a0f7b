"""The agent loop: one agent's rounds, from its instruction to its report.

An agent gets a fresh context (its system prompt, its instruction and its scope, and nothing else),
read-only tools over exactly its resources, and a budget of rounds, tokens and seconds checked
before each round. Its last allowed round is a forced landing: only ``submit_result`` may be
called. It ends by calling ``submit_result``, validated by ``AgentReport``; whatever else ends it
(its budget, Stop, a failure) becomes its status, and what it had found so far is kept.

``run_agent`` and ``_AgentLoop`` mirror ``loop.run_chat`` and ``loop._MainLoop``: the same rounds
(check, fit the history, call the model, run the round's tool calls concurrently), the same endings.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from pydantic import ValidationError

from . import causes
from .cancel import RunStopped, run_round
from .causes import Cause
from .compaction import compact
from .errors import ModelError, ModelTimeout, ToolFailed
from .events import Action, AgentAction, AgentFinished, AgentStarted, AgentStatus, ReasoningEvent, RoundStarted
from .notes import add_note
from .outcomes import RESULT_SPEC, RESULT_TOOL, AgentOutcome, AgentRecord, AgentReport, AgentTask
from .runtime import RunContext
from .scope import Scope
from .tokens import estimate_tokens, prompt_tokens
from .tools import Tool, run_tool_call
from .types import Effort, Message, ModelRequest, ModelResponse, NamedTool, Reasoning, ToolCall
from .usage import AgentBudget, AgentCounter, RunUsage

AGENT_SYSTEM_PROMPT = """You are a research agent. You work alone on one instruction, with read-only tools over the resources listed as your scope, and nothing else.
- Search, then read every relevant document in one call (several ids at once) rather than one per round.
- Report facts as they are in the documents, with the ids of the documents they come from. Do not guess; say what you could not establish.
- You cannot write, modify, send or store anything. You cannot delegate.
- After your first round, your last tool result ends with a line "Budget left: ...": the rounds (this one included), tokens and seconds you have left. Pace yourself by it: on your last round only submit_result is allowed.
- Finish by calling submit_result with your findings, the sources you read and the gaps that remain."""

LANDING_NOTICE = (
    "This is your last round: your other tools are withdrawn. Call submit_result now with what you "
    "have established so far, and list as gaps what you could not check."
)
NOT_AVAILABLE_TO_AGENT = (
    "You only have read-only tools over your scope: you cannot write, modify or send anything, nor delegate. "
    "Return what you found with submit_result."
)


def agent_first_message(task: AgentTask, scope: Scope, tools: Iterable[str]) -> str:
    """The agent's instruction and its scope: the whole of what it knows about the request."""
    parts = [f"Instruction:\n{task.instruction.strip()}", "Your scope:"]
    parts += [f"- knowledge base {kb}" for kb in scope.knowledge_bases]
    titles = {(d.kb, d.id): d.title for d in task.documents}
    for kb in scope.searchable[len(scope.knowledge_bases) :]:
        docs = ", ".join(f"{i} ({titles[(kb, i)]})" if (kb, i) in titles else i for i in scope.chosen(kb) or ())
        parts.append(f"- in knowledge base {kb}, only these documents: {docs}")
    names = set(tools)
    web = [t for t in ("web_search", "web_fetch") if t in names]
    if scope.web and web:
        parts.append(f"- the web ({', '.join(web)})")
    if scope.code and "run_code" in names:
        parts.append("- Python code (run_code), reading only your own knowledge bases")
    for name in scope.connectors:
        own = sorted(t for t in names if t.startswith(f"mcp_{name}__"))
        if own:
            parts.append(f"- connector {name} ({', '.join(own)}), read-only")
    return "\n".join(parts)


def context_refusal(ctx: RunContext, task: AgentTask, effort: Effort | None) -> str | None:
    """Why a task's agent cannot start: its first request (system prompt, instruction and scope, tool specs, room for
    its answer) does not fit its model's window, even compacted; None when it fits. Said to the main model as the
    task's error, before any call."""
    loop = _AgentLoop(ctx, "", task, AgentBudget(), effort)
    loop._fit(prompt_tokens(ModelRequest(messages=(), tools=loop.specs)))
    needed = prompt_tokens(ModelRequest(messages=tuple(loop.messages), tools=loop.specs)) + loop.cap
    window = task.model.context_window
    if needed <= window:
        return None
    return (
        f"Refused: this agent's first request needs about {needed:,} tokens (its instruction, its tools and room for "
        f"its answer) and the context window of {task.model.id} is {window:,} tokens. Shorten the instruction or "
        "choose a model with a larger window."
    )


def first_request(ctx: RunContext, task: AgentTask, effort: Effort | None) -> ModelRequest:
    """A task's agent's first request, as its first round would send it (system prompt, instruction and scope, tool
    specs; its output cap), before it launches: what a delegation's estimate starts from."""
    loop = _AgentLoop(ctx, "", task, AgentBudget(), effort)
    loop._fit(prompt_tokens(ModelRequest(messages=(), tools=loop.specs)))
    return ModelRequest(messages=tuple(loop.messages), tools=loop.specs, max_output_tokens=loop.cap)


async def run_agent(
    ctx: RunContext, agent_id: str, task: AgentTask, budget: AgentBudget, effort: Effort | None, call_id: str = ""
) -> AgentOutcome:
    """Run one agent to its end; never raises for a model or tool failure (it becomes a status). ``call_id``: the
    main model's ``agents`` call that launched it."""
    return await _AgentLoop(ctx, agent_id, task, budget, effort, call_id).run()


class _AgentLoop:
    def __init__(
        self,
        ctx: RunContext,
        agent_id: str,
        task: AgentTask,
        budget: AgentBudget,
        effort: Effort | None,
        call_id: str = "",
    ) -> None:
        self.ctx = ctx
        self.agent_id = agent_id
        self.call_id = call_id
        self.task = task
        self.info = task.model
        self.scope = Scope.from_resources(task.resources)
        self.tools: dict[str, Tool] = {t.spec.name: t for t in ctx.toolbox.tools_for(self.scope) if t.read_only}
        self.specs = (*(t.spec for t in self.tools.values()), RESULT_SPEC)
        self.effort = self.info.effort_for(effort)
        self.cap = self.info.output_cap_for(4_000, self.effort)
        self.messages: list[Message] = [
            Message.system(self._system_prompt()),
            Message.user(agent_first_message(task, self.scope, self.tools)),
        ]
        self.counter = AgentCounter(budget)
        self.usage = RunUsage()
        self.record = AgentRecord()
        self.texts: list[str] = []
        self.started = time.monotonic()
        self.extra_rounds = 0  # rounds granted past the budget: one to correct a result, one to relaunch a landing
        self.corrected = self.relaunched = self.forced = False
        self.landing: Cause | None = None  # why the forced landing, once it is decided
        self.cancel = ctx.cancel  # its own token once it runs (``CancelToken.agent``): the user may stop it alone

    def _system_prompt(self) -> str:
        profile = self.task.profile
        if profile is None:
            return AGENT_SYSTEM_PROMPT
        return AGENT_SYSTEM_PROMPT + f"\n\nProfile «{profile.name}»:\n{profile.instructions.strip()}"

    async def run(self) -> AgentOutcome:
        # Its own token before anything says it started: a stop for it, from then on, finds it.
        self.cancel = self.ctx.cancel.agent(self.agent_id)
        try:
            return await self._run()
        finally:
            self.ctx.cancel.release(self.agent_id)

    async def _run(self) -> AgentOutcome:
        ctx, info = self.ctx, self.info
        spec_tokens = prompt_tokens(ModelRequest(messages=(), tools=self.specs))  # the same every round
        await ctx.emit(
            AgentStarted(
                agent_id=self.agent_id,
                instruction=self.task.instruction,
                model=info.id,
                model_label=info.label,
                resources=self.task.resources,
                profile=self.task.profile.name if self.task.profile else None,
                max_rounds=self.counter.budget.max_rounds,
                rounds_asked=self.task.rounds_asked,
                documents=self.task.documents,
                call_id=self.call_id,
                estimate_eur=self.task.estimate.estimate_eur if self.task.estimate else None,
                estimate_max_eur=self.task.estimate.estimate_max_eur if self.task.estimate else None,
            )
        )
        try:
            while True:
                self.cancel.check(self.usage)
                if self.extra_rounds:
                    self.extra_rounds -= 1
                else:
                    exhausted = self.counter.exhausted()
                    if exhausted is not None:
                        return await self._finish("interrupted", exhausted)
                    self.landing = self.counter.landing_cause()
                note = self._note()
                # Fitted with room for the note, which goes into the last tool result as sent (``notes``).
                self._fit(spec_tokens + (estimate_tokens(note) if note else 0))
                if note:
                    add_note(self.messages, note)
                request = ModelRequest(
                    messages=tuple(self.messages),
                    tools=self.specs,
                    tool_choice=NamedTool(RESULT_TOOL) if self.forced else "required",
                    parallel_tool_calls=True,
                    max_output_tokens=self.cap,
                    reasoning_effort=self.effort,
                    language=ctx.language,
                )
                left = self.counter.left()
                await ctx.emit(
                    RoundStarted(
                        agent_id=self.agent_id,
                        round=self.counter.rounds + 1,
                        model=info.id,
                        forced=self.forced,
                        rounds_left=left.rounds,
                        tokens_left=left.tokens,
                        seconds_left=left.seconds,
                    )
                )
                response = await self._call_model(request)
                if response.text.strip():
                    self.texts.append(response.text)
                self.messages.append(response.as_message())
                outcome = await self._after(response)
                if outcome is not None:
                    return outcome
        except RunStopped as e:  # Stop: its call aborted or not made, or its round's tool calls cancelled
            if e.text.strip():
                self.texts.append(e.text)  # what it had written before Stop is kept
            return await self._finish("stopped", e.cause)
        except ModelTimeout as e:
            cause = Cause(code="seconds", limit=self.counter.budget.max_seconds)
            return await self._finish("interrupted", cause, f"time budget reached: {e}")
        except ModelError as e:
            return await self._finish("error", causes.model_error(e), f"the model call failed ({e})")

    def _note(self) -> str:
        """What this round's request adds to its last tool result: the budget left (every request after the first),
        then, on the forced landing's round, its notice."""
        parts = [self.counter.left().agent_line()] if self.counter.rounds else []
        if self.landing and not self.forced:
            self.forced = True
            parts.append(LANDING_NOTICE)
        return " ".join(parts)

    def _fit(self, spec_tokens: int) -> None:
        """Keep the history inside the agent's model's window: earlier tool results compacted."""
        compact(self.messages, self.info.context_window, reserve=self.cap + spec_tokens)

    async def _call_model(self, request: ModelRequest) -> ModelResponse:
        """One model call, counted against the budget whether it answers, fails or is aborted by Stop."""
        started = time.monotonic()
        try:
            response = await self.ctx.call_model(
                self.info.id,
                request,
                agent_id=self.agent_id,
                timeout=self.counter.call_timeout(),
                usage=self.usage,
                on_reasoning=self._on_reasoning,
                cancel=self.cancel,
            )
        except (ModelError, RunStopped):
            self.counter.after_call(None, time.monotonic() - started)
            raise
        self.counter.after_call(response.usage, time.monotonic() - started)
        return response

    async def _on_reasoning(self, reasoning: Reasoning) -> None:
        """The agent's reasoning summary, in its panel (its reasoning itself stays in its own history)."""
        event = ReasoningEvent.of(reasoning, self.counter.rounds + 1, self.info.id, self.agent_id)
        if event is not None:
            await self.ctx.emit(event)

    async def _after(self, response: ModelResponse) -> AgentOutcome | None:
        """What the round's answer leads to: the agent's end, or None for another round."""
        result_call = next((c for c in response.tool_calls if c.name == RESULT_TOOL), None)
        others = [c for c in response.tool_calls if c.name != RESULT_TOOL]
        if result_call is not None:
            return await self._submitted(result_call, others, response)
        if self.forced:
            # The forced round returned no result: relaunch once, then give up with the partial record.
            if self.relaunched:
                return await self._finish("error", Cause(code="no_result"))
            self.relaunched = True
            self.extra_rounds = 1
            self.messages += _not_run(others, "Not run: only submit_result is allowed on the last round.")
            return None
        if response.finish_reason == "length" and not response.tool_calls:
            return await self._finish("interrupted", Cause(code="output_cut"))
        if not others:
            self.messages.append(Message.user("Call a tool: search or read, or submit_result to finish."))
            return None
        self.cancel.check(self.usage)  # no tool starts after Stop
        failure = await self._run_calls(others)
        if failure is None:
            return None
        return await self._finish("error", Cause(code="tool_failed", kind=failure.kind), f"a tool failed ({failure})")

    async def _submitted(
        self, result_call: ToolCall, others: list[ToolCall], response: ModelResponse
    ) -> AgentOutcome | None:
        """The agent's report, or one chance to correct an invalid one (None: another round)."""
        try:
            report = AgentReport.model_validate(result_call.parsed_arguments())
        except (ValueError, ValidationError) as e:
            # A refused result is a step of the agent (its panel, the API's agent.steps): label = why.
            await self._result_step(ok=False, why=_brief(e))
            if self.corrected:
                return await self._finish(
                    "error", Cause(code="invalid_result"), f"its result was invalid twice ({_brief(e)})"
                )
            self.corrected = True
            self.extra_rounds = 1 if self.forced else 0
            self.messages += _not_run(others, "Not run: submit_result was called in the same round.")
            error = f"Invalid result: {_brief(e)}. Correct it and call submit_result again."
            self.messages.append(Message.tool(result_call, json.dumps({"error": error})))
            return None
        if self.corrected:  # the correction of a refused result is a step too
            await self._result_step(ok=True, why="")
        status: AgentStatus = "interrupted" if self.forced else "ok"
        if response.finish_reason == "length":
            status, self.landing = "interrupted", Cause(code="output_cut")
        return await self._finish(status, self.landing, report=report.as_text())

    async def _result_step(self, *, ok: bool, why: str) -> None:
        action = Action(tool="submit_result", kind="result", label=why, ok=ok)
        await self.ctx.emit(AgentAction(agent_id=self.agent_id, action=action))

    async def _run_calls(self, calls: list[ToolCall]) -> ToolFailed | None:
        """Run the round's tool calls concurrently; the failure that ends this agent (not the run), if a tool fails
        unexpectedly (the round's other calls are cancelled). Stop ends each call, stopped."""
        try:
            runs = await run_round([run_tool_call(self.tools, c, NOT_AVAILABLE_TO_AGENT, self.cancel) for c in calls])
        except ToolFailed as e:
            return e
        for run in runs:
            self.record.add(run)
            self.messages.append(Message.tool(run.call, run.content))
            action = (
                run.outcome.action
                if run.outcome and run.outcome.action
                else Action(tool=run.call.name, kind="other", label=run.error or run.call.name, ok=run.ok)
            )
            if not run.ok and action.stopped is None:  # a stopped call's action says so itself
                action = action.model_copy(update={"ok": False, "label": f"{run.call.name}: {run.error}"})
            sources = run.outcome.sources if run.outcome else ()
            await self.ctx.emit(
                AgentAction(
                    agent_id=self.agent_id,
                    action=action,
                    sources=sources,
                    call_id=run.call.id,
                    started_at=run.started_at,
                    seconds=run.seconds,
                    result_chars=len(run.content),
                )
            )
        return None

    async def _finish(
        self, status: AgentStatus, cause: Cause | None, reason: str | None = None, report: str | None = None
    ) -> AgentOutcome:
        """End the agent: ``cause`` says why as data, ``reason`` in English (``cause.english()`` unless given,
        with a detail the main model and the API read); without ``report``, the engine writes a partial one."""
        record = self.record
        reason = reason if reason is not None else (cause.english() if cause is not None else "")
        partial = report is None
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
            report = record.partial_report(headline, self.texts)
        outcome = AgentOutcome(
            agent_id=self.agent_id,
            task=self.task,
            status=status,
            reason=reason,
            rounds=self.counter.rounds,
            seconds=round(time.monotonic() - self.started, 3),
            usage=self.usage,
            report=report,
            tools_run=record.tools_run,
            sources=list(record.sources.values()),
            forced_landing=self.forced,
            cause=cause,
            partial_report=partial,
        )
        await self.ctx.emit(
            AgentFinished(
                agent_id=self.agent_id,
                model=self.info.id,
                status=status,
                reason=reason,
                cause=cause,
                rounds=outcome.rounds,
                seconds=outcome.seconds,
                cost_eur=self.usage.cost_eur,
                usage=self.usage.as_data(),
                report=report,
                partial_report=partial,
                tools_run=tuple(record.tools_run),
                sources=tuple(outcome.sources),
                forced_landing=self.forced,
            )
        )
        return outcome


def _not_run(calls: list[ToolCall], why: str) -> list[Message]:
    return [Message.tool(c, json.dumps({"error": why})) for c in calls]


def _brief(e: Exception) -> str:
    if isinstance(e, ValidationError):
        return "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors()[:3])
    return str(e)


__all__ = [
    "AGENT_SYSTEM_PROMPT",
    "LANDING_NOTICE",
    "agent_first_message",
    "context_refusal",
    "first_request",
    "run_agent",
]
