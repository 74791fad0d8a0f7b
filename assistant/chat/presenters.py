"""What a run's steps look like to the user: one timeline of text, searches and delegation lines, sources, usage.

The same views serve the full page (built from saved steps) and the live pushes (built from the
steps a consumer has seen so far), so that a reload and a live update always show the same thing.

Here: a run's view (``run_view``), from its agents (``agent_views``), its timeline (``timeline``: the main model's
text cut where each step happened) and the names the page words things by (``names``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from assistant.engine.causes import Cause
from assistant.engine.events import (
    ErrorEvent,
    StoppedEvent,
)
from assistant.engine.usage import RunUsage
from assistant.runs import wording
from assistant.runs.models import Run, Step
from assistant.runs.steps import with_events

from .agent_views import AgentView, agents_of
from .names import base_names, named_source
from .rendering import render_markdown
from .timeline import timeline_of


def run_view(
    run: Run,
    steps: list[Step] | None = None,
    reports: dict[str, SafeString] | None = None,
    names: Mapping[str, str] | None = None,
    pieces: dict[tuple[int, int], SafeString] | None = None,
) -> dict[str, Any]:
    """Everything the run fragments show; ``steps`` defaults to the run's saved steps, ``names`` (the bases'
    names, ``base_names``) to the run's organisation's; ``pieces`` caches the timeline's pieces of text."""
    pairs = with_events(run.steps.all() if steps is None else steps)
    events = [e for _step, e in pairs]
    names = base_names(run.organisation_id) if names is None else names
    agents = agents_of(events, reports, names)
    if not run.is_running:
        for agent in agents:
            if agent.running:  # its run ended without it (the process executing it died)
                agent.status, agent.cause = "error", Cause(code="run_ended")
    stopped = next((e.cause for e in events if isinstance(e, StoppedEvent)), None)
    failed = next((e.cause for e in reversed(events) if isinstance(e, ErrorEvent)), None)
    usage = RunUsage.of(run.usage)
    timeline, answer_start = timeline_of(pairs, agents, run.answer, run.is_running, pieces, names)
    return {
        "run": run,
        "agents": agents,
        "agents_working": run.is_running and any(a.running for a in agents),
        "timeline": timeline,
        "answer_start": answer_start,  # where the last piece of text, the answer so far, starts
        "by_model": sorted(usage.by_model.items()),
        "estimated_eur": usage.estimated_eur,
        # A source's base by its name, not its slug; a title in the reader's language where it has one.
        "sources": [named_source(s, names) for s in run.sources],
        "stopped_message": wording.cause_text(stopped or Cause(code="stopped_by_user"))
        if run.status == "stopped"
        else "",
        "error_message": wording.cause_text(failed) if run.status == "error" and failed is not None else "",
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
    shown = wording.grams(grams)
    models = usage.get("by_model") or {}
    if usage.get("carbon_estimated"):
        return wording.with_demo_estimate(_("Carbon: %(grams)s g CO₂e") % {"grams": shown}, models)
    if grams:
        return wording.with_demo_estimate(
            _("Carbon: at least %(grams)s g CO₂e (some models have no carbon data)") % {"grams": shown}, models
        )
    return _("Carbon: not estimated (no carbon data for these models)")
