"""Following runs live: a run's state as the page shows it, kept up to date from the events it publishes.

The protocol is ``runs.follow``'s (join the run's group first, read the run, then apply what the
group delivers, gaps filled from the database): ``LiveRun`` follows one run through a
``runs.follow.Follower`` and marks what each new step or piece of text changes on the page.

Every push is an HTML fragment with an ``id`` that htmx swaps in place (the answer, the agents'
block, the whole run once finished), or a new turn appended to ``#messages``: sending one twice
changes nothing, which is what makes reconnecting and several tabs simple.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.safestring import SafeString

from assistant.orgs.models import Organisation
from assistant.runs.follow import Follower, Item, steps_since
from assistant.runs.models import Conversation, Message, Run, Step

from .presenters import base_names, run_view
from .rendering import StreamingMarkdown

# The steps that change what the agents' block shows (an agent's usage, say, shows only at the end),
# and those among them that change one agent's line only.
VISIBLE_STEPS = frozenset({"agent_started", "round_started", "agent_action", "agent_finished", "tool_result"})
AGENT_PROGRESS = frozenset({"round_started", "agent_action"})


def find_conversation(user: AbstractBaseUser, pk: int) -> Conversation | None:
    """The (signed-in) user's own conversation in their organisation; anything else, a deleted one included,
    does not exist for them."""
    org = Organisation.objects.filter(memberships__user__pk=user.pk).order_by("memberships__pk").first()
    if org is None:
        return None
    return Conversation.objects.filter(pk=pk, organisation=org, user_id=user.pk, deleted__isnull=True).first()


def running_runs(conversation_id: int) -> list[str]:
    return [
        r.hex
        for r in Run.objects.filter(conversation_id=conversation_id, status="running").values_list("pk", flat=True)
    ]


@dataclass
class LiveRun:
    """One run as a page following it knows it: the saved part it read, then every event applied in order."""

    run: Run
    question: Message
    steps: list[Step]
    follower: Follower
    markdown: StreamingMarkdown = field(default_factory=StreamingMarkdown)
    reports: dict[str, SafeString] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    emitted: float | None = None  # when the oldest text not pushed yet left the engine (monotonic)
    names: dict[str, str] | None = None  # the organisation's bases' names, read once (pushes read no database)

    @classmethod
    def load(cls, run_id: str, conversation_id: int) -> LiveRun | None:
        try:
            pk = uuid.UUID(hex=run_id)
        except ValueError:
            return None
        run = Run.objects.filter(pk=pk, conversation_id=conversation_id).first()
        question = Message.objects.filter(run_id=pk, role="user").first()
        if run is None or question is None:
            return None
        steps = list(run.steps.all())
        follower = Follower(pk, seq=steps[-1].seq if steps else 0, answer=run.answer)
        names = base_names(run.organisation_id)
        return cls(run=run, question=question, steps=steps, follower=follower, names=names)

    @property
    def seq(self) -> int:
        return self.follower.seq

    @property
    def finished(self) -> bool:
        return not self.run.is_running

    def apply(self, message: dict[str, Any]) -> bool:
        """Apply one published event; False when something before it is missing (``catch_up`` first)."""
        items = self.follower.apply(message)
        if items is None:
            return False
        self._take(items, message)
        return True

    async def catch_up(self, message: dict[str, Any]) -> None:
        """Read the database until what precedes ``message`` is there, then apply it."""
        self._take(await self.follower.catch_up(message), message, caught_up=True)

    def merge(self, steps: list[Step], answer: str) -> None:
        """Take what the database has beyond what this follower has."""
        self._take(self.follower.merge(steps, answer), None, caught_up=True)

    def _take(self, items: list[Item], message: dict[str, Any] | None, caught_up: bool = False) -> None:
        """Keep what the follower added, and mark what it changes on the page (after a catch-up, the agents' block)."""
        for item in items:
            if isinstance(item, str):
                self.run.answer = self.follower.answer
                self.dirty.add("answer")
                if self.emitted is None and message is not None and "t" in message:
                    self.emitted = message["t"]
                continue
            self.steps.append(item)
            if caught_up:
                self.dirty.add("work")
            elif item.kind in AGENT_PROGRESS and item.agent_id:
                self.dirty.add(f"agent:{item.agent_id}")  # that agent's line only
            elif item.kind in VISIBLE_STEPS and (item.agent_id or item.kind == "tool_result"):
                self.dirty.add("work")  # a line appears, or the working line changes

    def view(self) -> dict[str, Any]:
        view = run_view(self.run, self.steps, self.reports, self.names)
        view["answer_html"] = functools.partial(self.markdown.render, self.run.answer)
        view["emitted"] = self.emitted
        return view

    def render_changes(self) -> str:
        """The fragments that changed since the last push (a new turn, the agents, the answer)."""
        if not self.dirty:
            return ""
        view = self.view()
        parts = []
        if "turn" in self.dirty:
            parts.append(
                render_to_string("chat/_turn_append.html", {"item": {"question": self.question, "view": view}})
            )
        if "work" in self.dirty:
            parts.append(render_to_string("chat/_work.html", {"view": view}))
        else:
            changed = {d.removeprefix("agent:") for d in self.dirty if d.startswith("agent:")}
            for agent in view["agents"]:
                if agent.agent_id in changed:
                    parts.append(render_to_string("chat/_agent.html", {"view": view, "agent": agent}))
        if "answer" in self.dirty:
            parts.append(render_to_string("chat/_answer.html", {"view": view}))
        self.dirty.clear()
        self.emitted = None
        return "".join(parts)

    def refresh_finished(self) -> None:
        """Once the run has ended: its saved outcome (status, sources, usage) and any step not seen."""
        steps, _ = steps_since(self.run.pk, self.seq)
        self.merge(steps, "")
        self.run = Run.objects.get(pk=self.run.pk)

    def render_run(self) -> str:
        """The whole run, finished: what was rendered while it streamed is reused, not rendered again."""
        return render_to_string("chat/_run.html", {"view": self.view()})


def render_finished(run_id: str, language: str, *, with_turn: bool) -> str:
    """A finished run, whole, from the database; ``with_turn`` adds its turn for a page that may lack it."""
    run = Run.objects.prefetch_related("steps").get(pk=uuid.UUID(hex=run_id))
    with translation.override(language):
        view = run_view(run)
        if with_turn:
            question = Message.objects.filter(run=run, role="user").first()
            return render_to_string("chat/_turn_append.html", {"item": {"question": question, "view": view}})
        return render_to_string("chat/_run.html", {"view": view})
