"""A run's saved steps as the API shows them: steps, the main model's rounds, usage and sources.

``TraceBuilder`` takes the steps one at a time, in order, so that the stream and the final
response are built by the same code: each step it takes may give one ``StreamEvent``. The
``agents`` tool call is a step once estimated (its ``delegation``: the estimate, the cap, whether it launched), and
each agent it started is a ``run_agent`` step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from assistant.engine.delegation import AGENTS_TOOL
from assistant.engine.events import (
    Action,
    AgentAction,
    AgentFinished,
    AgentStarted,
    DelegationEstimated,
    ErrorEvent,
    Event,
    FinalEvent,
    ModelCallFailed,
    ReasoningEvent,
    RoundStarted,
    Source,
    StoppedEvent,
    ToolResultEvent,
    UsageEvent,
)
from assistant.engine.types import ToolCall
from assistant.engine.usage import RunUsage, UsageData
from assistant.runs.steps import StepWithEvent, events_of

from .stream_schemas import StreamEvent
from .trace_schemas import (
    ActionOut,
    AgentOut,
    AgentStep,
    BudgetLeftOut,
    DelegationOut,
    ModelCallFailedStep,
    ModelUsageOut,
    RoundOut,
    SourceOut,
    ToolStep,
    Trace,
    UsageOut,
)


def usage_out(usage: UsageData | Mapping[str, Any] | None) -> UsageOut:
    """A saved usage (``RunUsage.as_data``, or ``Run.usage``'s JSON) with OpenAI's three token totals added."""
    data = usage if isinstance(usage, UsageData) else UsageData.model_validate(usage or {})
    by_model = {name: ModelUsageOut(**m.model_dump()) for name, m in data.by_model.items()}
    prompt = sum(m.prompt_tokens for m in by_model.values())
    completion = sum(m.completion_tokens for m in by_model.values())
    return UsageOut(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cost_eur=data.cost_eur,
        estimated_eur=data.estimated_eur,
        energy_wh=data.energy_wh,
        carbon_g=data.carbon_g,
        carbon_estimated=data.carbon_estimated,
        tokens_estimated=data.tokens_estimated,
        failed_calls=data.failed_calls,
        by_model=by_model,
    )


def _action(action: Action | None) -> ActionOut | None:
    return (
        ActionOut(kind=action.kind, label=action.label, count=action.count, demo_web=action.demo_web)
        if action
        else None
    )


def _stopped_code(action: Action | None) -> str | None:
    """Why a call stopped with its run, as the run's cause code (None: it was not stopped)."""
    if action is None or action.stopped is None:
        return None
    return (action.stopped.because or action.stopped).code


def _sources(items: Iterable[Source]) -> list[SourceOut]:
    return [SourceOut(**s.model_dump()) for s in items]


class TraceBuilder:
    def __init__(self) -> None:
        self.trace = Trace()
        self._round = 0
        self._agents: dict[str, AgentOut] = {}
        self._agent_rounds: dict[str, int] = {}
        self._live_usage = RunUsage()  # from the usage steps, while running
        self._agent_usage: dict[str, RunUsage] = {}  # each agent's, from its usage steps, until it ends
        self._sources: dict[str, SourceOut] = {}
        self._delegations: dict[str, ToolStep] = {}  # each estimated agents call's step, by its call's id
        self.ended: ErrorEvent | StoppedEvent | None = None
        """How the run ended, when it failed or stopped (its last ``error`` or ``stopped`` step)."""
        self.cut = False
        """The answer's last call stopped at its output cap (``FinalEvent.cut``)."""
        self.tool_calls: tuple[ToolCall, ...] = ()
        """The client's tools the main model called, on which the turn ended (``FinalEvent.tool_calls``)."""
        self.main_failure: ModelCallFailed | None = None
        """The main model's last failed call (what a failed run's error says of the provider)."""
        self.reasoning: list[str] = []
        """The main model's reasoning summaries, in order (``reasoning_content``)."""

    def add(self, step: StepWithEvent) -> StreamEvent | None:
        """Take one step (an unreadable one is left out, as ``steps.events_of`` does)."""
        events = events_of([step])
        return self.add_event(events[0]) if events else None

    def add_event(self, e: Event) -> StreamEvent | None:
        agent_id = e.agent_id
        if isinstance(e, UsageEvent):
            return self._count(e)
        elif isinstance(e, ModelCallFailed):
            return self._failed(e)
        elif isinstance(e, ErrorEvent | StoppedEvent) and agent_id is None:
            self.ended = e
        elif isinstance(e, FinalEvent) and agent_id is None:
            self.cut = e.cut
            self.tool_calls = e.tool_calls
        elif isinstance(e, ReasoningEvent) and agent_id is None and e.summary:
            self.reasoning.append(e.summary)
        elif isinstance(e, RoundStarted):
            if agent_id is not None:
                self._agent_rounds[agent_id] = e.round
                if agent_id in self._agents:
                    agent = self._agents[agent_id]
                    agent.rounds = e.round
                    if e.rounds_left is not None and e.tokens_left is not None and e.seconds_left is not None:
                        agent.budget_left = BudgetLeftOut(
                            round=e.round, rounds=e.rounds_left, tokens=e.tokens_left, seconds=e.seconds_left
                        )
            else:
                self._round = e.round
                self.trace.rounds.append(RoundOut(round=e.round, model=e.model, forced=e.forced))
        elif isinstance(e, DelegationEstimated) and agent_id is None:
            return self._delegation(e)
        elif isinstance(e, ToolResultEvent) and agent_id is None:
            estimated = self._delegations.get(e.call_id) if e.name == AGENTS_TOOL else None
            if estimated is not None:  # its step is there: what came of it
                estimated.ok, estimated.error = e.ok, e.error
                return None
            if e.name == AGENTS_TOOL and e.ok:
                return None  # its agents are the steps
            tool = ToolStep(
                round=self._round,
                tool=e.name,
                ok=e.ok,
                action=_action(e.action),
                error=e.error,
                sources=_sources(e.sources),
                reason_code=_stopped_code(e.action),
                started=e.action is None or e.action.started,
            )
            self._keep(tool.sources)
            self.trace.steps.append(tool)
            return StreamEvent(type="tool_call", step=tool)
        elif isinstance(e, AgentStarted):
            agent = AgentOut(
                id=e.agent_id,
                instruction=e.instruction,
                model=e.model,
                profile=e.profile,
                resources=list(e.resources),
                max_rounds=e.max_rounds,
                rounds_asked=e.rounds_asked,
                estimate_eur=e.estimate_eur,
                estimate_max_eur=e.estimate_max_eur,
            )
            self._agents[agent.id] = agent
            self._agent_usage[agent.id] = RunUsage()
            self.trace.steps.append(AgentStep(round=self._round, agent=agent))
            return StreamEvent(type="agent_started", agent_id=agent.id, agent=agent)
        elif isinstance(e, AgentAction) and e.agent_id in self._agents:
            a = e.action
            tool = ToolStep(
                round=self._agent_rounds.get(e.agent_id, 0),
                tool=a.tool,
                ok=a.ok,
                action=_action(a),
                error=None if a.ok else a.label,
                sources=_sources(e.sources),
                reason_code=_stopped_code(e.action),
                started=e.action.started,
            )
            self._keep(tool.sources)
            agent = self._agents[e.agent_id]
            agent.steps.append(tool)
            return StreamEvent(
                type="agent_action", agent_id=e.agent_id, step=tool, cost_eur=agent.cost_eur, usage=agent.usage
            )
        elif isinstance(e, AgentFinished) and e.agent_id in self._agents:
            agent = self._agents[e.agent_id]
            agent.status = e.status
            agent.reason = e.reason
            agent.reason_code = e.cause.code if e.cause is not None else None
            agent.rounds = e.rounds
            agent.seconds = e.seconds
            agent.cost_eur = e.cost_eur
            agent.estimated_eur = e.usage.estimated_eur
            agent.usage = usage_out(e.usage)
            agent.report = e.report
            agent.sources = _sources(e.sources)
            agent.forced_landing = e.forced_landing
            agent.budget_left = None
            self._keep(agent.sources)
            return StreamEvent(type="agent_finished", agent_id=e.agent_id, agent=agent)
        return None

    def _delegation(self, e: DelegationEstimated) -> StreamEvent | None:
        """An ``agents`` call's estimate: its step (in the round it was called), or that step updated with what came of
        it; said in the stream as a ``tool_call`` event once decided (not while the user is asked)."""
        delegation = DelegationOut(
            decision=e.decision,
            estimate_eur=e.estimate_eur,
            estimate_max_eur=e.estimate_max_eur,
            cap_eur=e.cap_eur,
            tasks=e.tasks,
        )
        step = self._delegations.get(e.call_id)
        if step is None:
            step = ToolStep(round=self._round, tool=AGENTS_TOOL, ok=True)
            self._delegations[e.call_id] = step
            self.trace.steps.append(step)
        step.delegation = delegation
        step.ok = e.decision in ("launched", "asking")
        step.reason_code = e.cause.code if e.cause is not None else None
        return None if e.decision == "asking" else StreamEvent(type="tool_call", step=step)

    def _count(self, e: UsageEvent) -> StreamEvent | None:
        """A call's usage: in its round (the main model's), in the run's live usage, and in its agent's figures so
        far (said in the stream with an ``agent_usage`` event)."""
        e.add_to(self._live_usage)
        if e.agent_id is not None:
            usage = self._agent_usage.get(e.agent_id)
            if usage is None:
                return None
            e.add_to(usage)
            return self._agent_figures(e.agent_id, usage)
        if self.trace.rounds:
            r = self.trace.rounds[-1]
            r.prompt_tokens += e.prompt_tokens
            r.completion_tokens += e.completion_tokens
            r.cached_prompt_tokens += e.cached_prompt_tokens
            r.cost_eur += e.cost_eur
            r.estimated_eur += e.estimated_eur
            if e.cost_source == "estimated":
                r.cost_source = "estimated"
        return None

    def _agent_figures(self, agent_id: str, usage: RunUsage) -> StreamEvent:
        """An agent's cost and usage so far, on the agent and as an ``agent_usage`` event."""
        agent = self._agents[agent_id]
        agent.cost_eur = usage.cost_eur
        agent.estimated_eur = round(usage.estimated_eur, 8)
        agent.usage = usage_out(usage.as_data())
        return StreamEvent(type="agent_usage", agent_id=agent_id, cost_eur=agent.cost_eur, usage=agent.usage)

    def _failed(self, e: ModelCallFailed) -> StreamEvent | None:
        """A failed model call: a step of its agent (or of the main model), counted in the live usage."""
        failed = ModelCallFailedStep(
            round=self._agent_rounds.get(e.agent_id, 0) if e.agent_id else self._round,
            model=e.model,
            error_kind=e.error_kind,
            billed=e.billed,
            status=e.status,
            message=e.message,
        )
        self._live_usage.failed(e.model)
        if e.agent_id is None:
            self.main_failure = e
            self.trace.steps.append(failed)
        elif e.agent_id in self._agents:
            self._agents[e.agent_id].steps.append(failed)
            usage = self._agent_usage[e.agent_id]
            usage.failed(e.model)
            return self._agent_figures(e.agent_id, usage)
        return None

    def _keep(self, sources: list[SourceOut]) -> None:
        for s in sources:
            self._sources.setdefault(s.id, s)

    def agent(self, agent_id: str) -> AgentOut | None:
        """One agent as its steps so far give it (None: the run started none by that id)."""
        return self._agents.get(agent_id)

    @property
    def reasoning_content(self) -> str | None:
        """The main model's reasoning summaries as one text (``OutputMessage.reasoning_content``), None without any."""
        return "\n\n".join(self.reasoning) if self.reasoning else None

    def live_usage(self) -> UsageOut:
        """The usage so far, from the usage steps (a finished run's saved usage is the reference)."""
        return usage_out(self._live_usage.as_data())

    def finish(self, usage: Mapping[str, Any] | None, sources: list[dict[str, Any]] | None) -> Trace:
        """The trace, with the run's saved usage and sources once it has ended, else those seen so far."""
        self.trace.usage = usage_out(usage) if usage else self.live_usage()
        self.trace.sources = [SourceOut(**s) for s in sources] if sources is not None else list(self._sources.values())
        return self.trace


def built_from(events: Iterable[Event]) -> TraceBuilder:
    """A builder that has taken a run's steps' events, in order (those its recorder saved:
    ``runs.execution.Heard``, or its saved steps through ``steps.events_of``, unreadable ones left out)."""
    builder = TraceBuilder()
    for event in events:
        builder.add_event(event)
    return builder


def trace_of(
    steps: Iterable[StepWithEvent], usage: Mapping[str, Any] | None = None, sources: list[dict[str, Any]] | None = None
) -> Trace:
    """The trace of saved steps (unreadable ones left out, ``steps.events_of``)."""
    return built_from(events_of(steps)).finish(usage, sources)
