"""Conversations, their messages, runs, each run's steps saved as they happen, and each run's lease.

The tables keep the names they had in the ``chat`` and ``workers`` apps (``db_table``): the models
moved here without their rows moving (``runs.0001_initial`` is a state-only migration).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import models

from assistant.engine.events import Event, Source
from assistant.orgs.models import Organisation

from .steps import load_event, load_step


class Conversation(models.Model):
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="conversations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    deleted = models.DateTimeField(null=True, blank=True)
    """When its owner deleted it: its text is erased (``chat.deletion``), the row and its runs stay for accounting."""

    class Meta:
        db_table = "chat_conversation"
        ordering = ["-updated"]

    def __str__(self) -> str:
        return self.title


class RunStatus(models.TextChoices):
    """A run's status: ``running``, then how it ended, the engine's ``RunStatus`` (``engine.events``) value for value
    (``tests/runs/test_status.py`` holds them together, with the API's ``RunStatusOut``). ``Run.Status`` too."""

    RUNNING = "running", "running"
    OK = "ok", "ok"
    STOPPED = "stopped", "stopped"
    ERROR = "error", "error"


class Run(models.Model):
    """One request to the assistant and everything it produced."""

    Status = RunStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="runs")
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="runs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    model = models.CharField(max_length=100)
    level = models.CharField(max_length=20, blank=True)
    resources = models.JSONField(default=list)
    category = models.CharField(max_length=100, blank=True)
    # The key of a run started through the API: its model restriction replaces the assistant's.
    api_key = models.ForeignKey("orgs.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    stop_requested = models.BooleanField(default=False)
    answer = models.TextField(blank=True)
    error = models.TextField(blank=True)
    rounds = models.PositiveIntegerField(default=0)
    sources = models.JSONField(default=list)
    usage = models.JSONField(default=dict)
    cost_eur = models.FloatField(default=0.0)
    # The asker's interface language (e.g. "fr"); empty: the site's. The offline demo model writes in it when it
    # cannot tell the question's language.
    language = models.CharField(max_length=10, blank=True, default="")
    # An API client's output cap, sampling and answer format for the main model (``engine.types.Sampling.as_json``).
    sampling = models.JSONField(default=dict, blank=True)
    # An API client's function tools for the main model (``engine.types.ClientTools.as_json``).
    client_tools = models.JSONField(default=dict, blank=True)
    # The main model's messages for a run that does not read its conversation's text alone (``start.prompt_json``): an
    # API request carrying tool calls and results, or one continuing a run that ended on the client's tools. Empty:
    # the run reads its conversation's messages.
    prompt = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)
    replaced_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="versions", db_index=True
    )
    """Set when the user edited or regenerated this turn: the run that replaced it (the latest version). A superseded
    run is no longer sent to the model; it stays for its cost, and as a previous version of the turn."""

    class Meta:
        db_table = "chat_run"
        ordering = ["created"]
        constraints = [
            # One running run per conversation: a second message waits in the queue (``intake.submit``).
            models.UniqueConstraint(
                fields=["conversation"],
                condition=models.Q(status=RunStatus.RUNNING),
                name="one_running_run_per_conversation",
            )
        ]

    @property
    def superseded(self) -> bool:
        return self.replaced_by_id is not None

    @property
    def is_running(self) -> bool:
        return self.status == Run.Status.RUNNING

    def set_sources(self, sources: Iterable[Source]) -> None:
        """What the run read, as the page and the API show it under the answer (saved with the run)."""
        self.sources = [s.model_dump(mode="json") for s in sources]


class Message(models.Model):
    """What the user wrote, and the assistant's answer once its run ends."""

    ROLES = [("user", "user"), ("assistant", "assistant")]

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=ROLES)
    content = models.TextField()
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    created = models.DateTimeField(auto_now_add=True)
    queued = models.BooleanField(default=False, db_index=True)
    """A user's message written while a run of the conversation was going on: it waits, with ``choices``, and is
    sent when that run ends (``execution.start_queued``); then it gets its run and is no longer queued."""
    choices = models.JSONField(default=dict, blank=True)
    """A queued message's model, level, resources and category."""
    queue_error = models.TextField(blank=True)
    """Why a queued message could not be sent when its turn came (it stays, for its writer to see and remove)."""

    class Meta:
        db_table = "chat_message"
        ordering = ["created", "pk"]


class Step(models.Model):
    """One engine event of a run (text deltas are folded into ``Run.answer``), saved by ``steps.save_event``.

    ``text_offset`` is where the step falls in the answer: the answer's length when it happened, so that
    a page draws the text, the delegation lines and the searches in the order they happened (None: a step
    saved before offsets were recorded, drawn before the answer).
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=30)
    agent_id = models.CharField(max_length=40, blank=True)
    data = models.JSONField()
    text_offset = models.PositiveIntegerField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "chat_step"
        ordering = ["seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="one_step_per_seq")]

    @functools.cached_property
    def event(self) -> Event:
        """The engine's event this step holds (raises ``steps.UnreadableStep`` when it holds none)."""
        return load_step(self)

    @classmethod
    def published(
        cls, run_id: Any, seq: int, data: dict[str, Any], text_offset: int | None = None, event: Event | None = None
    ) -> Step:
        """A step as a follower receives it from the run's group (``save_event``'s JSON), not saved; ``event``:
        that JSON's event, when the follower has read it already."""
        event = event if event is not None else load_event(data)
        step = cls(
            run_id=run_id,
            seq=seq,
            kind=event.kind,
            agent_id=event.agent_id or "",
            data=data,
            text_offset=text_offset,
        )
        step.__dict__["event"] = event
        return step


class Lease(models.Model):
    """Taken once by the process that executes a run, renewed while the run goes on: which process executes it,
    and when that process last said it was alive.

    One row per run (the primary key is the run): a run delivered twice by a queue is executed once.
    """

    run = models.OneToOneField(Run, primary_key=True, on_delete=models.CASCADE, related_name="lease")
    executor = models.CharField(max_length=200, help_text="host:pid of the process executing the run")
    claimed = models.DateTimeField(auto_now_add=True)
    heartbeat = models.DateTimeField(db_index=True)

    class Meta:
        db_table = "workers_lease"

    def __str__(self) -> str:
        return f"{self.run_id} on {self.executor}"
