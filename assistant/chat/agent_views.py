"""An agent as the page shows it (``AgentView``: its line, its rounds for the agent panel, its report), built from its
events (``agents_of``), for the full page and the live pushes alike."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from assistant.catalogue.naming import model_label
from assistant.engine.causes import Cause
from assistant.engine.events import (
    Action,
    AgentAction,
    AgentFinished,
    AgentStarted,
    ChosenDocument,
    Event,
    ModelCallFailed,
    ReasoningEvent,
    RoundStarted,
    UsageEvent,
)
from assistant.engine.outcomes import AgentReport
from assistant.engine.usage import RunUsage, UsageData
from assistant.runs import wording

from .names import profile_name
from .rendering import render_markdown

REPORT_PREVIEW_CHARS = 2_000


@dataclass
class ThinkingView:
    """What a model showed of its reasoning in one round (``ReasoningEvent``): its summary, folded under "Thinking",
    or that its provider refused a summary. ``key`` names it on the page, so that it stays open across pushes."""

    key: str
    summary: str
    unavailable: bool = False

    @property
    def html(self) -> SafeString:
        return summary_html(self.summary)

    @classmethod
    def of(cls, event: ReasoningEvent, key: str) -> ThinkingView:
        return cls(key=key, summary=event.summary, unavailable=event.summary_unavailable and not event.summary)


@functools.lru_cache(maxsize=1024)
def summary_html(summary: str) -> SafeString:
    """A reasoning summary as HTML, rendered once: the timeline and the agent panel show it again at each push."""
    return render_markdown(summary)


@dataclass
class RoundView:
    number: int
    forced: bool = False
    actions: list[Action] = field(default_factory=list)
    thinking: list[ThinkingView] = field(default_factory=list)
    """The agent's reasoning summaries of this round, before its actions."""


@dataclass
class AgentView:
    agent_id: str
    instruction: str
    model: str
    model_label: str
    resources: list[str]
    max_rounds: int
    resources_text: str = ""
    profile: str | None = None
    """The agent profile the main model chose for it, if one."""
    actions: list[Action] = field(default_factory=list)
    status: str = "running"
    cause: Cause | None = None
    rounds: int = 0
    seconds: float = 0.0
    cost_eur: float = 0.0
    estimated_eur: float = 0.0
    """The part of ``cost_eur`` that was estimated (calls cut or aborted, their tokens counted locally)."""
    estimate_eur: float | None = None
    """What it should cost, worked out before it launched (None: a run saved before estimates)."""
    estimate_max_eur: float | None = None
    """The most it could cost within its round budget, worked out before it launched."""
    usage: UsageData = field(default_factory=UsageData)
    report: str = ""
    partial_report: bool = False
    report_html: SafeString | None = None
    forced_landing: bool = False
    rounds_log: list[RoundView] = field(default_factory=list)
    """Each of its rounds with the actions of that round, in order (the agent panel)."""
    line_html: SafeString | None = None
    """Its delegation line as rendered already for this state (``chat.live``), which the work block then reuses."""
    rounds_asked: int | None = None
    """The rounds the main model asked for it when more than its level allows (it got ``max_rounds``)."""
    left: RoundStarted | None = None
    """Its latest round's start: what it had left then (its rounds, tokens and seconds), shown while it works."""

    @property
    def tokens(self) -> int:
        """Its tokens so far while it works (from its usage steps, as the API's ``agent.usage``), then in all."""
        return self.usage.total_tokens

    @property
    def budget_left(self) -> RoundStarted | None:
        """What it had left as its latest round started, while it works and its steps say so."""
        return self.left if self.running and self.left is not None and self.left.rounds_left is not None else None

    @property
    def running(self) -> bool:
        return self.status == "running"

    def current_round(self) -> RoundView:
        """Its current round in the agent panel (the first, before it said it started one)."""
        if not self.rounds_log:
            self.rounds_log.append(RoundView(number=max(self.rounds, 1)))
        return self.rounds_log[-1]

    def log_action(self, action: Action) -> None:
        """An action of its current round, for the agent panel."""
        self.current_round().actions.append(action)

    def log_thinking(self, event: ReasoningEvent) -> None:
        """A reasoning summary of its current round, for the agent panel."""
        current = self.current_round()
        key = f"{self.agent_id}-{current.number}-{len(current.thinking)}"
        current.thinking.append(ThinkingView.of(event, key))

    @property
    def instruction_short(self) -> str:
        """The instruction as its line shows it: its first sentence, or about its first 80 characters."""
        return short_instruction(self.instruction)

    @property
    def instruction_html(self) -> SafeString:
        """The short instruction (the main model's words) in its own element, inside the translated delegation line;
        the whole is in the expanded line and the agent panel."""
        return format_html('<span class="instruction">{}</span>', self.instruction_short)

    @property
    def report_preview(self) -> str:
        return self.report[:REPORT_PREVIEW_CHARS]

    @property
    def report_truncated(self) -> bool:
        return len(self.report) > REPORT_PREVIEW_CHARS

    @property
    def carbon_text(self) -> str:
        return carbon_amount(self.usage)

    @property
    def report_text(self) -> str:
        """The whole report with its headings in the reader's language (the agent panel)."""
        return report_markdown(self.report)

    @property
    def status_text(self) -> str:
        """The status in the reader's words, with its cause: «interrompu : budget de tours atteint (2/2 tours)»."""
        return wording.agent_status_text(self.status, self.cause)


SHORT_INSTRUCTION_CHARS = 80
_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)|\n")


def short_instruction(instruction: str, limit: int = SHORT_INSTRUCTION_CHARS) -> str:
    """The first sentence if it is short (up to a quarter over ``limit``), else the words that fit in ``limit``, with …."""
    text = instruction.strip()
    end = _SENTENCE_END.search(text)
    first = text[: end.end()].strip() if end else text
    if len(first) <= limit * 1.25:
        return first if first == text or first.endswith((".", "!", "?", "…")) else f"{first}…"
    cut = text[:limit].rsplit(None, 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(" ,;:") + "…"


def document_titles(documents: Iterable[ChosenDocument], base_names: Mapping[str, str]) -> dict[str, str]:
    """Chosen documents (``doc:<kb>/<id>``) as an agent's line shows them: by title, with their base's name."""
    return {
        d.resource: _("“%(title)s” (%(kb)s)") % {"title": d.title, "kb": base_names.get(d.kb, d.kb)} for d in documents
    }


def failed_call_text(e: ModelCallFailed) -> str:
    """A failed model call in the reader's words: refused by the provider (billed nothing) or cut (billed)."""
    why = f"HTTP {e.status}" if e.status else wording.model_error_text(e.error_kind)
    if e.billed:
        return _("Model call cut (%(why)s): billed for what was sent") % {"why": why}
    return _("Model call refused by the provider (%(why)s): not billed") % {"why": why}


def named_action(action: Action, base_names: Mapping[str, str]) -> Action:
    """The action with its knowledge base by name (``where``), as the page words it. A search saved before
    actions named their base wrote it into the label (``factures: Bimbamjob``): split it off."""
    where, label = action.where, action.label
    if action.tool == "kb_search" and not where and ": " in label:
        where, _sep, label = label.partition(": ")
    if not where:
        return action
    return action.model_copy(update={"where": base_names.get(where, where), "label": label})


def agents_of(
    events: Iterable[Event], reports: dict[str, SafeString] | None = None, base_names: Mapping[str, str] | None = None
) -> list[AgentView]:
    """One view per agent, in start order, built from its events.

    ``reports`` caches each finished agent's rendered report, so live updates render it once; ``base_names``
    (slug to name) words the knowledge bases an agent received.
    """
    agents: dict[str, AgentView] = {}
    so_far: dict[str, RunUsage] = {}  # each working agent's usage, from its usage steps
    for e in events:
        if isinstance(e, AgentStarted):
            titles = document_titles(e.documents, base_names or {})
            agents[e.agent_id] = AgentView(
                agent_id=e.agent_id,
                instruction=e.instruction,
                model=e.model,
                model_label=model_label(e.model_label),
                resources=list(e.resources),
                max_rounds=e.max_rounds,
                rounds_asked=e.rounds_asked,
                profile=profile_name(e.profile, base_names or {}),
                estimate_eur=e.estimate_eur,
                estimate_max_eur=e.estimate_max_eur,
                resources_text=", ".join(
                    titles.get(r) or wording.resource_text(r, base_names or {}) for r in e.resources
                ),
            )
        elif e.agent_id in agents:
            agent = agents[e.agent_id]
            if isinstance(e, AgentAction):
                action = named_action(e.action, base_names or {})
                agent.actions.append(action)
                agent.log_action(action)
            elif isinstance(e, ModelCallFailed):
                failed = Action(tool="", kind="other", ok=False, label=failed_call_text(e))
                agent.actions.append(failed)
                agent.log_action(failed)
            elif isinstance(e, RoundStarted):
                agent.rounds = e.round
                agent.left = e
                agent.rounds_log.append(RoundView(number=e.round, forced=e.forced))
            elif isinstance(e, ReasoningEvent):
                agent.log_thinking(e)
            elif isinstance(e, UsageEvent) and agent.running:
                # What it has cost and used so far, shown while it works: the figures the API gives (below).
                live = so_far.setdefault(e.agent_id, RunUsage())
                live.add(e.model, e.part, e.cost_eur, e.impact, estimated=e.estimated, estimated_eur=e.estimated_eur)
            elif isinstance(e, AgentFinished):
                agent.status = e.status
                agent.cause = e.cause
                agent.rounds = e.rounds
                agent.seconds = e.seconds
                agent.cost_eur = e.cost_eur
                agent.estimated_eur = e.usage.estimated_eur
                agent.usage = e.usage
                agent.report = e.report
                agent.partial_report = e.partial_report
                agent.forced_landing = e.forced_landing
    for agent_id, live in so_far.items():
        agent = agents[agent_id]
        if agent.running:  # once it has ended, its end says what it cost in all
            agent.cost_eur, agent.usage, agent.estimated_eur = live.cost_eur, live.as_data(), live.estimated_eur
    for agent in agents.values():
        if agent.report and not agent.partial_report:
            cache = reports if reports is not None else {}
            if agent.agent_id not in cache:
                cache[agent.agent_id] = render_markdown(report_markdown(agent.report_preview), heading_base=4)
            agent.report_html = cache[agent.agent_id]
    return list(agents.values())


def report_markdown(report: str) -> str:
    """An agent's report (``AgentReport.as_text``) with its Sources and Gaps headings in the reader's language."""
    parts = AgentReport.from_text(report)
    text = parts.findings
    if parts.sources:
        text += "\n\n" + _("Sources: %(sources)s") % {"sources": ", ".join(parts.sources)}
    if parts.gaps:
        separator = pgettext("between the gaps of a report", "; ")  # French puts a space before it
        text += "\n\n" + _("Gaps: %(gaps)s") % {"gaps": separator.join(parts.gaps)}
    return text


def carbon_amount(usage: UsageData) -> str:
    """An agent's carbon, for its panel: the estimate, or why there is none; the demo's marked as such."""
    if not usage.by_model:
        return "—"
    shown = wording.grams(usage.carbon_g)
    if usage.carbon_estimated:
        return wording.with_demo_estimate(_("%(grams)s g CO₂e") % {"grams": shown}, usage.by_model)
    if usage.carbon_g:
        return wording.with_demo_estimate(_("at least %(grams)s g CO₂e") % {"grams": shown}, usage.by_model)
    return _("not estimated")
