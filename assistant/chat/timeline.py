"""A run's timeline: the main model's text cut where each step happened (``Step.text_offset``).

A piece of text, then what happened after it (the main model's reasoning summaries, folded under "Thinking", its
searches and reads, the delegation lines, a delegation over its cap), then the next piece of text, and so on; its last
piece is the answer, to which live text is appended.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils.safestring import SafeString

from assistant.engine.causes import Cause
from assistant.engine.events import (
    AgentStarted,
    DelegationEstimated,
    Event,
    ReasoningEvent,
    ToolResultEvent,
)
from assistant.runs import wording
from assistant.runs.models import Step

from .agent_views import AgentView, ThinkingView, named_action
from .rendering import render_markdown


@dataclass
class DelegationView:
    """An ``agents`` call the user sees on its own: one over its cap, asked of them (``asking``: the question, with its
    buttons while the run waits) or not launched (why)."""

    event: DelegationEstimated
    running: bool
    """Its run is still running (the question can be answered)."""

    @property
    def asking(self) -> bool:
        return self.event.decision == "asking" and self.running

    @property
    def seconds_left(self) -> int:
        """How long the run still waits for an answer (0 once the wait is over)."""
        return max(0, round(self.event.expires_at - time.time()))

    @property
    def reason_text(self) -> str:
        """Why it was not launched, in the reader's words."""
        cause = self.event.cause or Cause(
            code="delegation_cap", used=self.event.estimate_max_eur, limit=self.event.cap_eur
        )
        return wording.cause_text(cause)


def delegation_shown(event: DelegationEstimated) -> bool:
    """Whether an ``agents`` call's estimate draws something of its own in the timeline: the question while it is
    asked, or the reason it was not launched (a launched one shows its agents' lines)."""
    return event.decision != "launched"


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
    entries: list[tuple[str, Any]] = field(default_factory=list)
    """("action", Action), ("agent", AgentView) or ("thinking", ThinkingView), in order."""
    working: bool = False  # one of its agents is working and the run waits for it
    kind: str = "work"

    @property
    def agents(self) -> list[AgentView]:
        return [value for what, value in self.entries if what == "agent"]


def timeline_of(
    steps: Iterable[tuple[Step, Event]],
    agents: list[AgentView],
    answer: str,
    running: bool,
    pieces: dict[tuple[int, int], SafeString] | None = None,
    names: Mapping[str, str] | None = None,
) -> tuple[list[TextPiece | WorkBlock], int]:
    """The run in the order things happened, and where its last piece of text (the answer so far) starts.

    ``steps`` are the run's steps with their events (``steps.with_events``): where each happened from the step
    (``text_offset``), what happened from its event.

    A step without an offset (saved before offsets were recorded) is placed before the answer, as the page
    always drew it; offsets never go back, and never past the text. ``pieces`` caches each piece's HTML;
    ``names`` (slug to name) words the bases searched.
    """
    by_id = {a.agent_id: a for a in agents}
    blocks: list[WorkBlock] = []
    offset = 0
    steps = list(steps)
    # Each agents call's latest estimate (asked, then answered), shown where it was first estimated.
    decided = {e.call_id: e for _s, e in steps if isinstance(e, DelegationEstimated) and e.agent_id is None}
    placed: set[str] = set()
    for step, event in steps:
        if step.text_offset is not None:
            offset = min(max(offset, step.text_offset), len(answer))
        entry: tuple[str, Any] | None = None
        if isinstance(event, AgentStarted) and event.agent_id in by_id:
            entry = ("agent", by_id[event.agent_id])
        elif isinstance(event, ToolResultEvent) and event.agent_id is None and event.action is not None:
            entry = ("action", named_action(event.action, names or {}))
        elif isinstance(event, ReasoningEvent) and event.agent_id is None:
            entry = ("thinking", ThinkingView.of(event, str(step.seq)))
        elif isinstance(event, DelegationEstimated) and event.agent_id is None and event.call_id not in placed:
            placed.add(event.call_id)
            latest = decided[event.call_id]
            if delegation_shown(latest):
                entry = ("delegation", DelegationView(latest, running))
        if entry is None:
            continue
        # What happens after nothing but the blank line the next round starts with joins the block before it.
        if not blocks or (blocks[-1].offset != offset and answer[blocks[-1].offset : offset].strip()):
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
