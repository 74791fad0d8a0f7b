"""Following runs live: a run's state as the page shows it, kept up to date from the events it publishes.

The protocol is ``runs.follow``'s (join the run's group first, read the run, then apply what the
group delivers, gaps filled from the database): ``LiveRun`` follows one run through a
``runs.follow.Follower`` and marks what each new step or piece of text changes on the page.

Every push is an HTML fragment with an ``id`` that htmx swaps in place (the answer so far, one
delegation line, the run's timeline when a line or a search appears, the agent panel the page
follows, the whole run once finished), or a new turn appended to ``#messages``: sending one twice
changes nothing, which is what makes reconnecting and several tabs simple. Text is appended to the
timeline's last piece (the answer so far); a new delegation line or search starts a new piece after it.
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
from assistant.runs.messages import RunEvent, RunFinished
from assistant.runs.models import Conversation, Message, Run, Step
from assistant.runs.steps import UnreadableStep

from .agent_views import AgentView
from .names import base_names
from .presenters import agent_of, run_view
from .rendering import StreamingMarkdown
from .timeline import WorkBlock

# The steps that change what the timeline shows, and those among them that change one agent's line only
# (its rounds, its actions, its reasoning summaries in its panel, and its cost with each of its usage events).
VISIBLE_STEPS = frozenset({"agent_started", "round_started", "agent_action", "agent_finished", "tool_result"})
AGENT_PROGRESS = frozenset({"round_started", "agent_action", "usage", "model_call_failed", "reasoning"})


def _shows_an_action(step: Step) -> bool:
    """Whether the main model's tool result draws a line in the timeline (a search, a read: ``timeline_of``)."""
    try:
        return getattr(step.event, "action", None) is not None
    except UnreadableStep:
        return True  # what it is, the timeline says


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
        for r in Run.objects.filter(conversation_id=conversation_id, status=Run.Status.RUNNING).values_list(
            "pk", flat=True
        )
    ]


@dataclass
class LiveRun:
    """One run as a page following it knows it: the saved part it read, then every event applied in order."""

    run: Run
    question: Message
    steps: list[Step]
    follower: Follower
    markdown: StreamingMarkdown = field(default_factory=StreamingMarkdown)
    markdown_start: int = 0  # where the piece of text ``markdown`` renders starts in the answer
    reports: dict[str, SafeString] = field(default_factory=dict)
    pieces: dict[tuple[int, int], SafeString] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    emitted: float | None = None  # when the oldest text not pushed yet left the engine (monotonic)
    names: dict[str, str] | None = None  # the organisation's bases' names, read once (pushes read no database)
    viewed: bool = False  # whether ``view`` ran since the page read the run (``markdown_start`` is the answer's)
    # Each agent's line as last rendered (and pushed), with what it shows (``line_key``).
    lines: dict[str, tuple[tuple[Any, ...], SafeString]] = field(default_factory=dict)
    # The parts of the agents' lines that never change (their instruction, model, links: ``{% once %}``), rendered once.
    fixed: dict[tuple[Any, ...], SafeString] = field(default_factory=dict)

    @classmethod
    def load(cls, run_id: str, conversation_id: int, language: str | None = None) -> LiveRun | None:
        """The run to push, if it is this conversation's; its bases' names in ``language`` (the page's)."""
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
        with translation.override(language):
            names = base_names(run.organisation_id)
        return cls(run=run, question=question, steps=steps, follower=follower, names=names)

    @property
    def seq(self) -> int:
        return self.follower.seq

    @property
    def finished(self) -> bool:
        return not self.run.is_running

    def apply(self, message: RunEvent) -> bool:
        """Apply one published event; False when something before it is missing (``catch_up`` first)."""
        items = self.follower.apply(message)
        if items is None:
            return False
        self._take(items, message)
        return True

    async def catch_up(self, message: RunEvent) -> None:
        """Read the database until what precedes ``message`` is there, then apply it."""
        self._take(await self.follower.catch_up(message), message, caught_up=True)

    def merge(self, steps: list[Step], answer: str) -> None:
        """Take what the database has beyond what this follower has."""
        self._take(self.follower.merge(steps, answer), None, caught_up=True)

    def _take(self, items: list[Item], message: RunEvent | None, caught_up: bool = False) -> None:
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
            elif item.kind == "agent_finished" and item.agent_id:
                self.dirty.add(f"ended:{item.agent_id}")  # its line, and its block's working line once none works
            elif item.kind == "delegation_estimate" and not item.agent_id:
                self.dirty.add("work")  # a question appears, or goes with its answer, or a delegation not launched
            elif item.kind == "tool_result" and not item.agent_id:
                if _shows_an_action(item):
                    self.dirty.add("work")  # the main model's search or read appears in the timeline
            elif item.kind == "reasoning" and not item.agent_id:
                self.dirty.add("work")  # the main model's reasoning summary appears, before that round's text
            elif item.kind in VISIBLE_STEPS and item.agent_id:
                self.dirty.add("work")  # a line appears

    def view(self) -> dict[str, Any]:
        view = run_view(self.run, self.steps, self.reports, self.names, self.pieces)
        start = view["answer_start"]
        if start != self.markdown_start:  # a new piece of text started after a line or a search
            self.markdown, self.markdown_start = StreamingMarkdown(), start
        view["answer_html"] = functools.partial(self.markdown.render, self.run.answer[start:])
        view["emitted"] = self.emitted
        self.viewed = True
        return view

    def answer_view(self) -> dict[str, Any]:
        """What the answer so far renders from (``chat/_answer.html``), without the rest of the run's view: where it
        starts is where the last ``view`` put it (only a new line or search, which the timeline shows, moves it)."""
        return {
            "run": self.run,
            "answer_start": self.markdown_start,
            "answer_html": functools.partial(self.markdown.render, self.run.answer[self.markdown_start :]),
            "emitted": self.emitted,
        }

    @property
    def progress_pending(self) -> bool:
        """Whether an agent's line changed (its rounds, actions or cost) and was not pushed yet."""
        return any(d.startswith("agent:") for d in self.dirty)

    def render_changes(self, follow_agent: str | None = None, *, progress: bool = True) -> str:
        """The fragments that changed since the last push (a new turn, the timeline or one agent's line, the
        answer so far), and the panel of ``follow_agent`` (the agent the page follows) when that agent changed.

        ``progress=False`` leaves out the agents' lines whose progress only changed (and that agent's panel): they
        stay to push, with the next push that takes them (``progress_pending``). A new line, the timeline, the
        answer and a panel just opened go out at once."""
        if not self.dirty:
            return ""
        changed = {d.removeprefix("agent:") for d in self.dirty if d.startswith("agent:")}
        ended = {d.removeprefix("ended:") for d in self.dirty if d.startswith("ended:")}
        if not progress and "work" not in self.dirty:
            later = {f"agent:{agent}" for agent in changed}
            if not self.dirty - later:
                return ""
            changed = set()
        else:
            later = set()
        if self.dirty - later == {"answer"} and self.viewed:
            # More text only: nothing the timeline shows changed, so where the answer starts has not either.
            return self._render_answer()
        view = self.view()
        unchanged = self.reuse_lines(view, render=bool(self.dirty & {"turn", "work"}))
        parts: list[str] = []
        if "turn" in self.dirty:
            parts.append(
                render_to_string("chat/_turn_append.html", {"item": {"question": self.question, "view": view}})
            )
        if "work" in self.dirty:
            parts.append(render_to_string("chat/_timeline.html", {"view": view}))  # the answer so far with it
        else:
            lines = (changed | ended) - unchanged  # a line pushed as it shows now is not pushed again
            for block in view["timeline"]:
                if isinstance(block, WorkBlock) and not block.working and ended & {a.agent_id for a in block.agents}:
                    for agent in block.agents:
                        self.line(view, agent)
                    parts.append(render_to_string("chat/_work.html", {"view": view, "block": block}))
                    lines -= {a.agent_id for a in block.agents}  # in the block just pushed
            for agent in view["agents"]:
                if agent.agent_id in lines:
                    parts.append(self.line(view, agent))
            if "answer" in self.dirty:
                parts.append(render_to_string("chat/_answer.html", {"view": view}))
        changed |= ended
        if follow_agent is not None and (self.dirty & {"work", "panel"} or follow_agent in changed):
            parts.append(self.render_panel(view, follow_agent))
        self.dirty.clear()
        self.dirty |= later
        self.emitted = None
        return "".join(parts)

    def render_text(self) -> str:
        """The answer's text not pushed yet, alone, when nothing else but agents' progress changed ("" otherwise):
        a run's last words go out at once, before its end is read from the database and the whole run rendered."""
        progress = {d for d in self.dirty if d.startswith("agent:")}
        return self._render_answer() if self.viewed and self.dirty - progress == {"answer"} else ""

    def _render_answer(self) -> str:
        html = render_to_string("chat/_answer.html", {"view": self.answer_view()})
        self.dirty.discard("answer")
        self.emitted = None
        return html

    def line_key(self, agent: AgentView) -> tuple[Any, ...]:
        """What an agent's line (``chat/_agent.html``) shows that can change while its run streams: its rounds, actions,
        tokens, cost and budget left as it works, then its end (status, report, duration; a run's end before its
        agent's changes its status too, ``presenters.run_view``, and with it the "Stop this agent" button). The rest
        (its instruction, model, resources, estimate, links) is set as it starts. A reasoning summary shows in its
        panel only: it leaves its line as it was."""
        return (
            agent.status,
            agent.cause,
            agent.rounds,
            agent.left,
            len(agent.actions),
            agent.usage,
            agent.cost_eur,
            agent.estimated_eur,
            agent.seconds,
            agent.report,
            agent.partial_report,
            agent.forced_landing,
        )

    def reuse_lines(self, view: dict[str, Any], *, render: bool = False) -> set[str]:
        """Give each agent whose line was rendered in its present state that line, for the blocks to reuse; with
        ``render``, render the others' (a block or the timeline is about to show every line). The agents whose line
        was reused: the page shows it as it is."""
        reused = set()
        for agent in view["agents"]:
            cached = self.lines.get(agent.agent_id)
            if cached is not None and cached[0] == self.line_key(agent):
                agent.line_html = cached[1]
                reused.add(agent.agent_id)
            elif render:
                self.line(view, agent)
        return reused

    def line(self, view: dict[str, Any], agent: AgentView) -> SafeString:
        """An agent's delegation line (``chat/_agent.html``), rendered once per state."""
        if agent.line_html is None:
            context = {"view": view, "agent": agent, "once": self.fixed}
            agent.line_html = SafeString(render_to_string("chat/_agent.html", context))
            self.lines[agent.agent_id] = (self.line_key(agent), agent.line_html)
        return agent.line_html

    def render_panel(self, view: dict[str, Any], agent_id: str) -> str:
        """The body of one agent's panel, as ``GET …/agents/<agent_id>/`` renders it ("" for no such agent)."""
        agent = agent_of(view, agent_id)
        if agent is None:
            return ""
        return render_to_string("chat/_agent_panel_body.html", {"view": view, "agent": agent})

    def refresh_finished(self, finished: RunFinished | None = None) -> None:
        """Once the run has ended (``finished``: the message that said so): its saved outcome (status, sources, usage)
        and any step not seen, unless that message says none was missed (``Follower.has_all``). Ended by another than
        its recorder (the reaper, once its process died), the run is read again whole: that process may have published
        a step it never saved, whose number the reaper's last step then took."""
        if finished is None or finished.get("seq") is None:
            self.run = Run.objects.get(pk=self.run.pk)
            self.steps = list(self.run.steps.all())
            self.follower = Follower(self.run.pk, seq=self.steps[-1].seq if self.steps else 0, answer=self.run.answer)
            self.lines.clear()
            self.pieces.clear()
            return
        if not self.follower.has_all(finished):
            steps, _ = steps_since(self.run.pk, self.seq)
            self.merge(steps, "")
        self.run = Run.objects.get(pk=self.run.pk)

    def render_run(self, follow_agent: str | None = None) -> str:
        """The whole run, finished (with the panel of ``follow_agent``): what was rendered while it streamed is
        reused, not rendered again."""
        view = self.view()
        self.reuse_lines(view, render=True)
        html = render_to_string("chat/_run.html", {"view": view})
        return html + (self.render_panel(view, follow_agent) if follow_agent is not None else "")


def render_finished(run_id: str, language: str, *, with_turn: bool) -> str:
    """A finished run, whole, from the database; ``with_turn`` adds its turn for a page that may lack it."""
    run = Run.objects.prefetch_related("steps").get(pk=uuid.UUID(hex=run_id))
    with translation.override(language):
        view = run_view(run)
        if with_turn:
            question = Message.objects.filter(run=run, role="user").first()
            return render_to_string("chat/_turn_append.html", {"item": {"question": question, "view": view}})
        return render_to_string("chat/_run.html", {"view": view})
