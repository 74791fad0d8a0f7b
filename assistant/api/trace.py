"""A run's saved steps as the API shows them: steps, the main model's rounds, usage and sources.

``TraceBuilder`` takes the steps one at a time, in order, so that the stream and the final
response are built by the same code: each step it takes may give one ``StreamEvent``. The
``agents`` tool call itself is not a step: each agent it started is a ``run_agent`` step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from assistant.engine.delegation import AGENTS_TOOL

from .schemas import (
    ActionOut,
    AgentOut,
    AgentStep,
    ModelCallFailedStep,
    ModelUsageOut,
    RoundOut,
    SourceOut,
    StreamEvent,
    ToolStep,
    Trace,
    UsageOut,
)


class StepLike(Protocol):
    kind: str
    agent_id: str
    data: Any


def usage_out(usage: dict[str, Any]) -> UsageOut:
    """A saved ``RunUsage.as_dict()`` with OpenAI's three token totals added."""
    by_model = {name: ModelUsageOut(**m) for name, m in (usage.get("by_model") or {}).items()}
    prompt = sum(m.prompt_tokens for m in by_model.values())
    completion = sum(m.completion_tokens for m in by_model.values())
    return UsageOut(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cost_eur=float(usage.get("cost_eur", 0.0)),
        energy_wh=float(usage.get("energy_wh", 0.0)),
        carbon_g=float(usage.get("carbon_g", 0.0)),
        carbon_estimated=bool(usage.get("carbon_estimated", False)),
        tokens_estimated=sum(m.tokens_estimated for m in by_model.values()),
        failed_calls=sum(m.failed_calls for m in by_model.values()),
        by_model=by_model,
    )


def _action(data: dict[str, Any] | None) -> ActionOut | None:
    return ActionOut(kind=data["kind"], label=data["label"], count=data.get("count")) if data else None


def _sources(items: Iterable[dict[str, Any]]) -> list[SourceOut]:
    return [SourceOut(**s) for s in items]


class TraceBuilder:
    def __init__(self) -> None:
        self.trace = Trace()
        self._round = 0
        self._agents: dict[str, AgentOut] = {}
        self._agent_rounds: dict[str, int] = {}
        self._live_usage: dict[str, dict[str, float]] = {}  # by model, from usage steps, while running
        self._sources: dict[str, SourceOut] = {}

    def add(self, step: StepLike) -> StreamEvent | None:
        d: dict[str, Any] = step.data
        kind, agent_id = step.kind, step.agent_id or None
        if kind == "usage":
            self._count(d, agent_id)
        elif kind == "model_call_failed":
            self._failed(d, agent_id)
        elif kind == "round_started":
            if agent_id is not None:
                self._agent_rounds[agent_id] = d["round"]
                if agent_id in self._agents:
                    self._agents[agent_id].rounds = d["round"]
            else:
                self._round = d["round"]
                self.trace.rounds.append(RoundOut(round=d["round"], model=d["model"], forced=d.get("forced", False)))
        elif kind == "tool_result" and agent_id is None:
            if d["name"] == AGENTS_TOOL and d["ok"]:
                return None  # its agents are the steps
            tool = ToolStep(
                round=self._round,
                tool=d["name"],
                ok=d["ok"],
                action=_action(d.get("action")),
                error=d.get("error"),
                sources=_sources(d.get("sources", ())),
            )
            self._keep(tool.sources)
            self.trace.steps.append(tool)
            return StreamEvent(type="tool_call", step=tool)
        elif kind == "agent_started":
            agent = AgentOut(
                id=d["agent_id"],
                instruction=d["instruction"],
                model=d["model"],
                profile=d.get("profile"),
                resources=list(d["resources"]),
                max_rounds=d["max_rounds"],
            )
            self._agents[agent.id] = agent
            self.trace.steps.append(AgentStep(round=self._round, agent=agent))
            return StreamEvent(type="agent_started", agent_id=agent.id, agent=agent)
        elif kind == "agent_action" and agent_id in self._agents:
            a = d["action"]
            tool = ToolStep(
                round=self._agent_rounds.get(agent_id, 0),
                tool=a["tool"],
                ok=a.get("ok", True),
                action=_action(a),
                error=None if a.get("ok", True) else a["label"],
                sources=_sources(d.get("sources", ())),
            )
            self._keep(tool.sources)
            self._agents[agent_id].steps.append(tool)
            return StreamEvent(type="agent_action", agent_id=agent_id, step=tool)
        elif kind == "agent_finished" and agent_id in self._agents:
            agent = self._agents[agent_id]
            agent.status = d["status"]
            agent.reason = d.get("reason", "")
            agent.rounds = d["rounds"]
            agent.seconds = d["seconds"]
            agent.cost_eur = d["cost_eur"]
            agent.usage = usage_out(d.get("usage") or {})
            agent.report = d["report"]
            agent.sources = _sources(d.get("sources", ()))
            agent.forced_landing = d.get("forced_landing", False)
            self._keep(agent.sources)
            return StreamEvent(type="agent_finished", agent_id=agent_id, agent=agent)
        return None

    def _count(self, d: dict[str, Any], agent_id: str | None) -> None:
        if agent_id is None and self.trace.rounds:
            r = self.trace.rounds[-1]
            r.prompt_tokens += d["prompt_tokens"]
            r.completion_tokens += d["completion_tokens"]
            r.cached_prompt_tokens += d.get("cached_prompt_tokens", 0)
            r.cost_eur += d["cost_eur"]
        m = self._live_usage.setdefault(d["model"], {})
        m["calls"] = m.get("calls", 0) + 1
        if d.get("estimated"):
            m["tokens_estimated"] = m.get("tokens_estimated", 0) + 1
        for field in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens", "reasoning_tokens", "cost_eur"):
            m[field] = m.get(field, 0) + d.get(field, 0)
        if d.get("energy_wh"):
            m["energy_wh"] = m.get("energy_wh", 0.0) + d["energy_wh"]
            m["carbon_g"] = m.get("carbon_g", 0.0) + d["carbon_g"]
            m["estimated"] = m.get("estimated", 0) + 1

    def _failed(self, d: dict[str, Any], agent_id: str | None) -> None:
        """A failed model call: a step of its agent (or of the main model), counted in the live usage."""
        failed = ModelCallFailedStep(
            round=self._agent_rounds.get(agent_id, 0) if agent_id else self._round,
            model=d["model"],
            error_kind=d["error_kind"],
            billed=d["billed"],
            status=d.get("status"),
            message=d.get("message", ""),
        )
        if agent_id is None:
            self.trace.steps.append(failed)
        elif agent_id in self._agents:
            self._agents[agent_id].steps.append(failed)
        m = self._live_usage.setdefault(d["model"], {"calls": 0, "cost_eur": 0.0})
        m["failed_calls"] = m.get("failed_calls", 0) + 1

    def _keep(self, sources: list[SourceOut]) -> None:
        for s in sources:
            self._sources.setdefault(s.id, s)

    def live_usage(self) -> UsageOut:
        """The usage so far, from the usage steps (a finished run's saved usage is the reference)."""
        by_model = {
            name: {k: v for k, v in m.items() if k != "estimated"} for name, m in sorted(self._live_usage.items())
        }
        estimated = bool(by_model) and all(m.get("estimated", 0) == m["calls"] for m in self._live_usage.values())
        return usage_out(
            {
                "cost_eur": sum(m["cost_eur"] for m in by_model.values()),
                "energy_wh": sum(m.get("energy_wh", 0.0) for m in by_model.values()),
                "carbon_g": sum(m.get("carbon_g", 0.0) for m in by_model.values()),
                "carbon_estimated": estimated,
                "by_model": by_model,
            }
        )

    def finish(self, usage: dict[str, Any] | None, sources: list[dict[str, Any]] | None) -> Trace:
        """The trace, with the run's saved usage and sources once it has ended, else those seen so far."""
        self.trace.usage = usage_out(usage) if usage else self.live_usage()
        self.trace.sources = _sources(sources) if sources is not None else list(self._sources.values())
        return self.trace


def trace_of(
    steps: Iterable[StepLike], usage: dict[str, Any] | None = None, sources: list[dict[str, Any]] | None = None
) -> Trace:
    builder = TraceBuilder()
    for step in steps:
        builder.add(step)
    return builder.finish(usage, sources)
