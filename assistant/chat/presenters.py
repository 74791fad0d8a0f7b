"""What a run's steps look like to the user: delegation lines with their details, sources, usage.

The same views serve the full page (built from saved steps) and the live pushes (built from the
steps a consumer has seen so far), so that a reload and a live update always show the same thing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from assistant.engine.cancel import STOP_MESSAGES
from assistant.engine.events import (
    Action,
    AgentAction,
    AgentFinished,
    AgentStarted,
    Event,
    RoundStarted,
    StoppedEvent,
    ToolResultEvent,
)
from assistant.engine.usage import RunUsage
from assistant.runs.models import Run, Step
from assistant.runs.steps import events_of

from .rendering import render_markdown

REPORT_PREVIEW_CHARS = 2_000


@dataclass
class AgentView:
    agent_id: str
    instruction: str
    model: str
    model_label: str
    resources: list[str]
    max_rounds: int
    actions: list[Action] = field(default_factory=list)
    status: str = "running"
    reason: str = ""
    rounds: int = 0
    seconds: float = 0.0
    cost_eur: float = 0.0
    report: str = ""
    report_html: SafeString | None = None
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

    @property
    def status_text(self) -> str:
        """The status in the user's words: ok; interrupted with its reason; stopped; error with its message."""
        if self.status == "ok":
            return _("ok")
        if self.status == "interrupted":
            return _("interrupted: %(reason)s") % {"reason": self.reason} if self.reason else _("interrupted")
        if self.status == "stopped":
            return stop_message(self.reason)
        if self.status == "error":
            return _("error: %(message)s") % {"message": self.reason} if self.reason else _("error")
        return _("working")


def stop_message(message: str) -> str:
    """Why a run or an agent stopped, translated when it is one of the engine's known causes."""
    known = {
        STOP_MESSAGES["user"]: _("stopped on request"),
        STOP_MESSAGES["budget"]: _("stopped: the category's monthly budget is reached"),
        STOP_MESSAGES["cost_cap"]: _("stopped: the task's cost cap is reached"),
    }
    return known.get(message, message or _("stopped on request"))


def agents_of(events: Iterable[Event], reports: dict[str, SafeString] | None = None) -> list[AgentView]:
    """One view per agent, in start order, built from its events.

    ``reports`` caches each finished agent's rendered report, so live updates render it once.
    """
    agents: dict[str, AgentView] = {}
    for e in events:
        if isinstance(e, AgentStarted):
            agents[e.agent_id] = AgentView(
                agent_id=e.agent_id,
                instruction=e.instruction,
                model=e.model,
                model_label=e.model_label,
                resources=list(e.resources),
                max_rounds=e.max_rounds,
            )
        elif e.agent_id in agents:
            agent = agents[e.agent_id]
            if isinstance(e, AgentAction):
                agent.actions.append(e.action)
            elif isinstance(e, RoundStarted):
                agent.rounds = e.round
            elif isinstance(e, AgentFinished):
                agent.status = e.status
                agent.reason = e.reason
                agent.rounds = e.rounds
                agent.seconds = e.seconds
                agent.cost_eur = e.cost_eur
                agent.report = e.report
                agent.forced_landing = e.forced_landing
    for agent in agents.values():
        if agent.report:
            cache = reports if reports is not None else {}
            if agent.agent_id not in cache:
                cache[agent.agent_id] = render_markdown(agent.report_preview)
            agent.report_html = cache[agent.agent_id]
    return list(agents.values())


def run_view(run: Run, steps: list[Step] | None = None, reports: dict[str, SafeString] | None = None) -> dict[str, Any]:
    """Everything the run fragments show; ``steps`` defaults to the run's saved steps."""
    events = events_of(run.steps.all() if steps is None else steps)
    agents = agents_of(events, reports)
    if not run.is_running:
        for agent in agents:
            if agent.running:  # its run ended without it (the process executing it died)
                agent.status, agent.reason = "error", _("the run ended before this agent returned")
    stopped = next((e.message for e in events if isinstance(e, StoppedEvent)), "")
    usage = RunUsage.of(run.usage)
    return {
        "run": run,
        "agents": agents,
        "agents_working": run.is_running and any(a.running for a in agents),
        "main_actions": [
            e.action for e in events if isinstance(e, ToolResultEvent) and e.agent_id is None and e.action is not None
        ],
        "by_model": sorted(usage.by_model.items()),
        "stopped_message": stop_message(stopped) if run.status == "stopped" else "",
        # Called by the template only when it shows the answer (live pushes replace it).
        "answer_html": functools.partial(render_markdown, run.answer),
        "emitted": None,
        "carbon": carbon_line(run.usage),
    }


def carbon_line(usage: dict[str, Any]) -> str:
    """The footer's carbon: the run's estimate, or why there is none (never a made-up zero)."""
    if "carbon_g" not in usage:  # a run saved before carbon was estimated
        return ""
    grams = float(usage["carbon_g"])
    shown = f"{grams:.2g}" if grams < 1 else f"{grams:.1f}"
    if usage.get("carbon_estimated"):
        return _("Carbon: %(grams)s g CO₂e") % {"grams": shown}
    if grams:
        return _("Carbon: at least %(grams)s g CO₂e (some models have no carbon data)") % {"grams": shown}
    return _("Carbon: not estimated (no carbon data for these models)")
