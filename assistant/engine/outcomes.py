"""What an agent is given and what it comes back with: its task, its report, its outcome.

``AgentTask`` is a task of an ``agents`` call once checked (``delegation.py``); ``AgentReport`` is
what ``submit_result`` takes; ``AgentOutcome`` is how the agent ended, whatever its status, with
what ``AgentRecord`` kept of its tool calls so that nothing it found is lost when it ends without
a report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from .catalogue import ModelInfo
from .causes import Cause
from .estimate import AgentEstimate
from .events import AgentStatus, ChosenDocument, Source, keep_sources
from .policy import AgentProfile
from .tools import ToolRun
from .types import ToolSpec
from .usage import RunUsage

RESULT_TOOL = "submit_result"

NOTE_FOR_PARTIAL = (
    "This agent did not finish: its report is partial. Do not fill the gaps yourself; say what is missing, "
    "or relaunch an agent with a more precise instruction."
)
NOTE_FOR_STOPPED_ALONE = (
    "The user stopped this agent ({agent}) while it worked: use what it had found, say what is missing, and do not "
    "launch an agent again for the same instruction."
)


class AgentReport(BaseModel):
    """The arguments of ``submit_result``."""

    findings: str = Field(
        min_length=1, description="What you established, with the ids of the documents it comes from."
    )
    sources: list[str] = Field(default_factory=list, description="Ids or addresses of what you read.")
    gaps: list[str] = Field(default_factory=list, description="What you could not establish or check.")

    def as_text(self) -> str:
        """The report as the main model reads it: the findings, then ``Sources: a, b`` and ``Gaps: x; y``."""
        text = self.findings.strip()
        if self.sources:
            text += SOURCES_LABEL + ", ".join(self.sources)
        if self.gaps:
            text += GAPS_LABEL + "; ".join(self.gaps)
        return text

    @classmethod
    def from_text(cls, text: str) -> AgentReport:
        """A report back from its text (``as_text``'s), so that a page can word its headings in its language."""
        rest, _, gaps = text.partition(GAPS_LABEL)
        findings, _, sources = rest.partition(SOURCES_LABEL)
        return cls.model_construct(
            findings=findings.strip(),
            sources=[s.strip() for s in sources.split(",") if s.strip()],
            gaps=[g.strip() for g in gaps.split(";") if g.strip()],
        )


SOURCES_LABEL = "\n\nSources: "
GAPS_LABEL = "\n\nGaps: "


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
    documents: tuple[ChosenDocument, ...] = ()
    """Chosen documents (their ``doc:`` resources are in ``resources``): of their bases, the agent reads only these."""
    rounds_asked: int | None = None
    """The rounds the main model asked when more than its level allows (``max_rounds`` is then the level's budget)."""
    estimate: AgentEstimate | None = None
    """Its figures, worked out before it launched (``estimate.py``): its ``AgentStarted`` step carries them."""


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
    cause: Cause | None = None
    """Why the status, as data (``reason`` is its English sentence)."""
    partial_report: bool = False
    """The report is the engine's account of what the agent had done (it wrote none)."""

    def for_main_model(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "agent": self.agent_id,
            "model": self.task.model.id,
            "status": self.status,
            "rounds": self.rounds,
            "report": self.report,
            "documents_read": [f"{s.id} ({s.title})" for s in self.sources],
        }
        if self.task.rounds_asked is not None:
            data["max_rounds"] = (
                f"{self.task.max_rounds}: the level's round budget (you asked {self.task.rounds_asked}, more than it allows)"
            )
        if self.status != "ok":
            data["reason"] = self.reason
            if self.cause is not None:
                data["cause"] = self.cause.model_dump(exclude_none=True)
            data["partial_report"] = self.partial_report
            data["tools_run"] = self.tools_run
            stopped_alone = self.cause is not None and self.cause.agent_id is not None
            data["note"] = NOTE_FOR_STOPPED_ALONE.format(agent=self.agent_id) if stopped_alone else NOTE_FOR_PARTIAL
        return data


@dataclass(slots=True)
class AgentRecord:
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
            base = f" in {action.where}" if action.where else ""
            self.notes.append(f"Searched {action.label!r}{base}: {action.count} results. {titles}".strip())
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
