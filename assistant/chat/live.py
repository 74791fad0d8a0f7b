"""Following runs live: a run's state as the page shows it, kept up to date from the events it publishes.

A run publishes every event to its group ``run_<hex>`` (``runs.Recorder``): steps numbered by
``seq``, text deltas placed by their ``offset`` in the answer. A follower joins the group *first*,
then reads the run from the database, then applies what the group delivers: a step it already read
or a piece of text it already has is skipped, and a gap (a message dropped, or the database read
being a little behind the stream) is filled from the database. So a page that joins mid-run misses
nothing and shows nothing twice.

Every push is an HTML fragment with an ``id`` that htmx swaps in place (the answer, the agents'
block, the whole run once finished), or a new turn appended to ``#messages``: sending one twice
changes nothing, which is what makes reconnecting and several tabs simple.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import AbstractBaseUser
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.safestring import SafeString

from assistant.engine.events import TextDeltaEvent
from assistant.orgs.models import Organisation

from .models import Conversation, Message, Run, Step
from .presenters import run_view
from .rendering import StreamingMarkdown
from .steps import load_event

# The steps that change what the agents' block shows (an agent's usage, say, shows only at the end),
# and those among them that change one agent's line only.
VISIBLE_STEPS = frozenset({"agent_started", "round_started", "agent_action", "agent_finished", "tool_result"})
AGENT_PROGRESS = frozenset({"round_started", "agent_action"})
CATCH_UP_TRIES = 40
CATCH_UP_PAUSE = 0.05  # the recorder writes to the database at least every 0.1 s


def conversation_group(conversation_id: int) -> str:
    return f"conversation_{conversation_id}"


async def announce(run: Run) -> None:
    """Tell every page open on the conversation that a run started, so that each shows it."""
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(conversation_group(run.conversation_id), {"type": "conversation.run", "run": run.pk.hex})


async def announce_deleted(conversation_id: int) -> None:
    """Tell every page open on the conversation that it was deleted: each closes its websocket."""
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(conversation_group(conversation_id), {"type": "conversation.deleted"})


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
    """One run as a follower knows it: the saved part it read, then every event applied in order."""

    run: Run
    question: Message
    steps: list[Step]
    seq: int
    markdown: StreamingMarkdown = field(default_factory=StreamingMarkdown)
    reports: dict[str, SafeString] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    emitted: float | None = None  # when the oldest text not pushed yet left the engine (monotonic)

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
        return cls(run=run, question=question, steps=steps, seq=steps[-1].seq if steps else 0)

    @property
    def finished(self) -> bool:
        return not self.run.is_running

    def apply(self, message: dict[str, Any]) -> bool:
        """Apply one published event; False when something before it is missing (catch up first)."""
        seq: int = message["seq"]
        event = load_event(message["event"])
        if isinstance(event, TextDeltaEvent):
            if seq > self.seq:
                return False
            have = len(self.run.answer)
            offset: int = message.get("offset", have)
            if offset > have:
                return False
            if offset + len(event.text) > have:
                self.run.answer += event.text[have - offset :]
                self.dirty.add("answer")
                if self.emitted is None and "t" in message:
                    self.emitted = message["t"]
            return True
        if seq <= self.seq:
            return True
        if seq > self.seq + 1:
            return False
        self.steps.append(Step.published(self.run.pk, seq, message["event"]))
        self.seq = seq
        if event.kind in AGENT_PROGRESS and event.agent_id:
            self.dirty.add(f"agent:{event.agent_id}")  # that agent's line only
        elif event.kind in VISIBLE_STEPS and (event.agent_id or event.kind == "tool_result"):
            self.dirty.add("work")  # a line appears, or the working line changes
        return True

    def merge(self, steps: list[Step], answer: str) -> None:
        """Take what the database has beyond what this follower has."""
        for step in steps:
            if step.seq == self.seq + 1:
                self.steps.append(step)
                self.seq = step.seq
                self.dirty.add("work")
        if len(answer) > len(self.run.answer):
            self.run.answer = answer
            self.dirty.add("answer")

    def view(self) -> dict[str, Any]:
        view = run_view(self.run, self.steps, self.reports)
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


def steps_since(run_id: uuid.UUID, seq: int) -> tuple[list[Step], str]:
    steps = list(Step.objects.filter(run_id=run_id, seq__gt=seq).order_by("seq"))
    answer = Run.objects.filter(pk=run_id).values_list("answer", flat=True).first() or ""
    return steps, answer


async def catch_up(live: LiveRun, message: dict[str, Any]) -> bool:
    """Read the database until what precedes ``message`` is there, then apply it."""
    for _ in range(CATCH_UP_TRIES):
        steps, answer = await database_sync_to_async(steps_since)(live.run.pk, live.seq)
        live.merge(steps, answer)
        if live.apply(message):
            return True
        await asyncio.sleep(CATCH_UP_PAUSE)
    return False  # the finished run is rendered whole from the database anyway


def render_finished(run_id: str, language: str, *, with_turn: bool) -> str:
    """A finished run, whole, from the database; ``with_turn`` adds its turn for a page that may lack it."""
    run = Run.objects.prefetch_related("steps").get(pk=uuid.UUID(hex=run_id))
    with translation.override(language):
        view = run_view(run)
        if with_turn:
            question = Message.objects.filter(run=run, role="user").first()
            return render_to_string("chat/_turn_append.html", {"item": {"question": question, "view": view}})
        return render_to_string("chat/_run.html", {"view": view})
