"""What a run's steps look like to the user: one timeline of text, searches and delegation lines, sources, usage.

The same views serve the full page (built from saved steps) and the live pushes (built from the
steps a consumer has seen so far), so that a reload and a live update always show the same thing.

The timeline (``timeline_of``) is the main model's text cut where each step happened (``Step.text_offset``):
a piece of text, then what happened after it (the main model's searches and reads, the delegation lines),
then the next piece of text, and so on; its last piece is the answer, to which live text is appended.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from assistant.engine.cancel import STOP_MESSAGES
from assistant.engine.events import ChosenDocument
from assistant.runs import leases
from assistant.runs.management.commands.recover_runs import MESSAGE as SERVER_STOPPED
from assistant.runs.models import Run, Step

from .rendering import render_markdown

REPORT_PREVIEW_CHARS = 2_000


@dataclass
class RoundView:
    number: int
    forced: bool = False
    actions: list[dict[str, Any]] = field(default_factory=list)


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
    report_html: SafeString | None = None
    forced_landing: bool = False
    rounds_log: list[RoundView] = field(default_factory=list)
    """Each of its rounds with the actions of that round, in order (the agent panel)."""

    @property
    def running(self) -> bool:
        return self.status == "running"

    def log_action(self, action: dict[str, Any]) -> None:
        """An action of its current round, for the agent panel."""
        if not self.rounds_log:
            self.rounds_log.append(RoundView(number=max(self.rounds, 1)))
        self.rounds_log[-1].actions.append(action)

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


def resource_labels(resources: Iterable[str], documents: Iterable[ChosenDocument | dict[str, Any]]) -> list[str]:
    """An agent's resources as its line shows them: a chosen document by its title and base, the rest as named."""
    titles = {}
    for d in documents:
        doc = d if isinstance(d, ChosenDocument) else ChosenDocument.model_validate(d)
        titles[doc.resource] = _("“%(title)s” (%(kb)s)") % {"title": doc.title, "kb": doc.kb}
    return [titles.get(r, r) for r in resources]


def failed_call_text(d: dict[str, Any]) -> str:
    """A failed model call in the reader's words: refused by the provider (billed nothing) or cut (billed)."""
    status = f"HTTP {d['status']}" if d.get("status") else d.get("error_kind", "")
    if d.get("billed"):
        return _("Model call cut (%(why)s): billed for what was sent") % {"why": status}
    return _("Model call refused by the provider (%(why)s): not billed") % {"why": status}


def failure_message(message: str) -> str:
    """Why a run failed, translated when it is one of the known causes (its process died, no worker took it)."""
    known = {
        leases.DIED: _(
            "The process writing this answer stopped unexpectedly (it was killed, or its machine was lost). "
            "Ask again for a complete answer."
        ),
        leases.NOT_TAKEN: _("No worker took this request in time. Ask again in a moment."),
        leases.NOT_QUEUED: _(
            "The request could not be handed to a worker (the queue is unreachable). Ask again in a moment."
        ),
        SERVER_STOPPED: _(
            "The server stopped while this answer was being written; what it had written so far is kept."
        ),
    }
    return known.get(message, message)


def agents_of(steps: Iterable[Step], reports: dict[str, SafeString] | None = None) -> list[AgentView]:
    """One view per agent, in start order, built from its steps.

    ``reports`` caches each finished agent's rendered report, so live updates render it once.
    """
    agents: dict[str, AgentView] = {}
    for step in steps:
        d = step.data
        if step.kind == "agent_started":
            agents[step.agent_id] = AgentView(
                agent_id=step.agent_id,
                instruction=d["instruction"],
                model=d["model"],
                model_label=d["model_label"],
                resources=resource_labels(d["resources"], d.get("documents") or []),
                max_rounds=d["max_rounds"],
            )
        elif step.agent_id in agents:
            agent = agents[step.agent_id]
            if step.kind == "agent_action":
                agent.actions.append(d["action"])
                agent.log_action(d["action"])
            elif step.kind == "model_call_failed":
                failed = {"tool": "", "kind": "other", "ok": False, "label": failed_call_text(d)}
                agent.actions.append(failed)
                agent.log_action(failed)
            elif step.kind == "round_started":
                agent.rounds = d["round"]
                agent.rounds_log.append(RoundView(number=d["round"], forced=bool(d.get("forced"))))
            elif step.kind == "usage" and agent.running:
                agent.cost_eur += float(d.get("cost_eur", 0.0))  # what it has cost so far, shown while it works
            elif step.kind == "agent_finished":
                agent.status = d["status"]
                agent.reason = d["reason"]
                agent.rounds = d["rounds"]
                agent.seconds = d["seconds"]
                agent.cost_eur = d["cost_eur"]
                agent.report = d["report"]
                agent.forced_landing = d["forced_landing"]
    for agent in agents.values():
        if agent.report:
            cache = reports if reports is not None else {}
            if agent.agent_id not in cache:
                cache[agent.agent_id] = render_markdown(agent.report_preview, heading_base=4)
            agent.report_html = cache[agent.agent_id]
    return list(agents.values())


@dataclass
class TextPiece:
    """A piece of the main model's text that is over: something happened after it."""

    index: int
    start: int
    end: int
    html: SafeString
    kind: str = "text"


@dataclass
class WorkBlock:
    """What happened at one point of the text, in order: the main model's searches and reads, delegation lines."""

    index: int
    offset: int
    entries: list[tuple[str, Any]] = field(default_factory=list)  # ("action", action) or ("agent", AgentView)
    working: bool = False  # one of its agents is working and the run waits for it
    kind: str = "work"

    @property
    def agents(self) -> list[AgentView]:
        return [value for what, value in self.entries if what == "agent"]


def timeline_of(
    steps: Iterable[Step],
    agents: list[AgentView],
    answer: str,
    running: bool,
    pieces: dict[tuple[int, int], SafeString] | None = None,
) -> tuple[list[TextPiece | WorkBlock], int]:
    """The run in the order things happened, and where its last piece of text (the answer so far) starts.

    A step without an offset (saved before offsets were recorded) is placed before the answer, as the page
    always drew it; offsets never go back, and never past the text. ``pieces`` caches each piece's HTML.
    """
    by_id = {a.agent_id: a for a in agents}
    blocks: list[WorkBlock] = []
    offset = 0
    for step in steps:
        if step.text_offset is not None:
            offset = min(max(offset, step.text_offset), len(answer))
        entry: tuple[str, Any] | None = None
        if step.kind == "agent_started" and step.agent_id in by_id:
            entry = ("agent", by_id[step.agent_id])
        elif step.kind == "tool_result" and not step.agent_id and step.data.get("action"):
            entry = ("action", step.data["action"])
        if entry is None:
            continue
        if not blocks or blocks[-1].offset != offset:
            blocks.append(WorkBlock(index=len(blocks), offset=offset))
        blocks[-1].entries.append(entry)
    items: list[TextPiece | WorkBlock] = []
    start = 0
    cache = pieces if pieces is not None else {}
    for block in blocks:
        if block.offset > start:
            key = (start, block.offset)
            if key not in cache:
                cache[key] = render_markdown(answer[start : block.offset])
            items.append(TextPiece(index=len(items), start=start, end=block.offset, html=cache[key]))
        block.working = running and any(a.running for a in block.agents)
        items.append(block)
        start = block.offset
    return items, start


def run_view(
    run: Run,
    steps: list[Step] | None = None,
    reports: dict[str, SafeString] | None = None,
    pieces: dict[tuple[int, int], SafeString] | None = None,
) -> dict[str, Any]:
    """Everything the run fragments show; ``steps`` defaults to the run's saved steps."""
    if steps is None:
        steps = list(run.steps.all())
    agents = agents_of(steps, reports)
    if not run.is_running:
        for agent in agents:
            if agent.running:  # its run ended without it (the process executing it died)
                agent.status, agent.reason = "error", _("the run ended before this agent returned")
    stopped = next((s.data.get("message", "") for s in steps if s.kind == "stopped"), "")
    timeline, answer_start = timeline_of(steps, agents, run.answer, run.is_running, pieces)
    return {
        "run": run,
        "agents": agents,
        "agents_working": run.is_running and any(a.running for a in agents),
        "timeline": timeline,
        "answer_start": answer_start,  # where the last piece of text, the answer so far, starts
        "by_model": sorted(run.usage.get("by_model", {}).items()),
        "stopped_message": stop_message(stopped) if run.status == "stopped" else "",
        "error_message": failure_message(run.error) if run.status == "error" else "",
        # Called by the template only when it shows the answer (live pushes replace it).
        "answer_html": functools.partial(render_markdown, run.answer[answer_start:]),
        "emitted": None,
        "carbon": carbon_line(run.usage),
    }


def agent_of(view: dict[str, Any], agent_id: str) -> AgentView | None:
    return next((a for a in view["agents"] if a.agent_id == agent_id), None)


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
