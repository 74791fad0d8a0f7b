"""What a run's steps look like to the user: delegation lines with their details, sources, usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .models import Run, Step

REPORT_PREVIEW_CHARS = 2_000


@dataclass
class AgentView:
    agent_id: str
    instruction: str
    model: str
    model_label: str
    resources: list[str]
    max_rounds: int
    actions: list[dict[str, Any]] = field(default_factory=list)
    status: str = "running"
    reason: str = ""
    rounds: int = 0
    seconds: float = 0.0
    cost_eur: float = 0.0
    report: str = ""
    forced_landing: bool = False

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def report_preview(self) -> str:
        return self.report[:REPORT_PREVIEW_CHARS]

    @property
    def report_truncated(self) -> bool:
        return len(self.report) > REPORT_PREVIEW_CHARS


def agents_of(steps: list[Step]) -> list[AgentView]:
    """One view per agent, in start order, built from its steps."""
    agents: dict[str, AgentView] = {}
    for step in steps:
        d = step.data
        if step.kind == "agent_started":
            agents[step.agent_id] = AgentView(
                agent_id=step.agent_id,
                instruction=d["instruction"],
                model=d["model"],
                model_label=d["model_label"],
                resources=list(d["resources"]),
                max_rounds=d["max_rounds"],
            )
        elif step.agent_id in agents:
            agent = agents[step.agent_id]
            if step.kind == "agent_action":
                agent.actions.append(d["action"])
            elif step.kind == "round_started":
                agent.rounds = d["round"]
            elif step.kind == "agent_finished":
                agent.status = d["status"]
                agent.reason = d["reason"]
                agent.rounds = d["rounds"]
                agent.seconds = d["seconds"]
                agent.cost_eur = d["cost_eur"]
                agent.report = d["report"]
                agent.forced_landing = d["forced_landing"]
    return list(agents.values())


def run_view(run: Run) -> dict[str, Any]:
    steps = list(run.steps.all())
    agents = agents_of(steps)
    return {
        "run": run,
        "agents": agents,
        "agents_working": run.is_running and any(a.running for a in agents),
        "main_actions": [s.data["action"] for s in steps if s.kind == "tool_result" and not s.agent_id and s.data.get("action")],
        "by_model": sorted(run.usage.get("by_model", {}).items()),
    }
