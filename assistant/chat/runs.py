"""Starting, executing and stopping runs.

``execute_run`` is the one path a run takes, wherever it executes: the web server's event loop in
the embedded default (``launch``), a Celery worker when scaled out. It feeds the engine's events to
a ``Recorder`` that saves them as steps and publishes them to the run's channel-layer group, and it
feeds the engine's ``CancelToken`` from this process (``request_stop``) and, through
``workers.leases.Watch``, from the shared ``Run.stop_requested`` flag and a broadcast on the
channel layer, so that Stop reaches a run wherever it runs. The process executing a run holds its
lease; a run whose process dies is failed by ``workers.leases.reap``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
import uuid
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from assistant.budgets import services as budgets
from assistant.budgets.ledger import ledger_for
from assistant.engine.cancel import CancelToken
from assistant.engine.errors import RequestRefused
from assistant.engine.events import Event, TextDeltaEvent
from assistant.engine.loop import run_chat
from assistant.engine.policy import LEVELS, Level, RunRequest, plan_request
from assistant.engine.runtime import RunContext
from assistant.engine.tools import Toolbox
from assistant.engine.types import Message as EngineMessage
from assistant.engine.usage import CostCap, Ledgers, UsageLedger
from assistant.knowledge.backend import OrgKnowledge
from assistant.knowledge.models import KnowledgeBase
from assistant.knowledge.tools import tool_factories
from assistant.orgs.models import ApiKey, Organisation
from assistant.orgs.services import policy_for
from assistant.workers import leases

from . import providers
from .models import Conversation, Message, Run, Step
from .steps import save_event

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.1

# Runs executing in this process: their tasks (kept alive) and their cancel tokens.
_tasks: dict[uuid.UUID, asyncio.Task[None]] = {}
_tokens: dict[uuid.UUID, CancelToken] = {}


def group_name(run_id: uuid.UUID) -> str:
    return f"run_{run_id.hex}"


@dataclass(frozen=True, slots=True)
class Ask:
    """What the user asks: the text, the model, the reasoning level and the resources."""

    text: str
    model: str
    level: Level | None
    resources: tuple[str, ...]
    category: str = ""
    """The task category's slug; empty for the organisation's default."""


def check(org: Organisation, ask: Ask, api_key: ApiKey | None = None) -> None:
    """Refuse, before any model call, what the policy or the organisation's knowledge bases forbid."""
    if ask.level is not None and ask.level not in LEVELS:
        raise RequestRefused(f"Unknown reasoning level '{ask.level}'.")
    request = RunRequest(
        messages=(EngineMessage.user(ask.text),), model=ask.model, level=ask.level, resources=ask.resources
    )
    plan_request(request, providers.catalogue(), policy_for(org, api_key))
    wanted = [r[3:] for r in ask.resources if r.startswith("kb:")]
    known = set(KnowledgeBase.objects.filter(organisation=org, slug__in=wanted).values_list("slug", flat=True))
    for slug in wanted:
        if slug not in known:
            raise RequestRefused(f"The knowledge base '{slug}' does not exist or you may not read it.")


def create_run(
    user: User,
    org: Organisation,
    conversation: Conversation | None,
    ask: Ask,
    api_key: ApiKey | None = None,
) -> Run:
    """Check the request, then save the user's message and a running run, together."""
    check(org, ask, api_key)
    category = budgets.admit(org, ask.category, ask.text, ask.model)
    with transaction.atomic():
        if conversation is None:
            conversation = Conversation.objects.create(organisation=org, user=user, title=ask.text[:80])
        run = Run.objects.create(
            conversation=conversation,
            organisation=org,
            user=user,
            model=ask.model,
            level=ask.level or "",
            resources=list(ask.resources),
            category=category.slug if category is not None else "",
            api_key=api_key,
        )
        Message.objects.create(conversation=conversation, role="user", content=ask.text, run=run)
        conversation.save(update_fields=["updated"])
    return run


def launch(run_id: uuid.UUID, cost_cap_eur: float | None = None) -> asyncio.Task[None]:
    """Execute a run in this process's event loop, or on a Celery worker (``RUNS_EXECUTOR=celery``).

    Either way it goes on when the browser goes away; ``cost_cap_eur`` caps what it may cost.
    """
    if settings.RUNS_EXECUTOR == "celery":
        from assistant.workers.tasks import submit

        work = submit(run_id, cost_cap_eur)
    else:
        work = execute_run(run_id, cost_cap_eur)
    # A fresh context: the run must not inherit the request's (its thread executor ends with it).
    task = asyncio.get_running_loop().create_task(work, context=contextvars.Context())
    _tasks[run_id] = task
    task.add_done_callback(lambda _: _tasks.pop(run_id, None))
    return task


async def wait_for(run_id: uuid.UUID) -> None:
    """Wait for a run executing in this process to end (tests, shutdown)."""
    task = _tasks.get(run_id)
    if task is not None:
        await asyncio.shield(task)


async def request_stop(run_id: uuid.UUID) -> bool:
    """Stop a run: at once if it executes here, through the shared flag wherever it executes."""
    updated = await Run.objects.filter(pk=run_id, status="running").aupdate(stop_requested=True)
    token = _tokens.get(run_id)
    if token is not None:
        token.cancel("user")
    if updated:
        await leases.broadcast_stop(run_id)
    return bool(updated)


class Recorder:
    """Saves events as steps (text deltas folded into the answer) and publishes each one at once.

    Text deltas are published on the loop's next turn, together: a model streaming at human pace
    yields between words, so each word still goes out at once, while a burst (a fast model, a
    provider's buffered chunk) goes out as one message instead of hundreds.
    """

    def __init__(self, run_id: uuid.UUID) -> None:
        self.run_id = run_id
        self.answer = ""
        self.seq = 0
        self._pending: list[Step] = []
        self._dirty = False
        self._wake = asyncio.Event()
        self._closed = False
        self._layer = get_channel_layer()
        self._writer = asyncio.ensure_future(self._write_loop())
        self._text: list[str] = []  # deltas not published yet, from ``_text_offset`` in the answer
        self._text_offset = 0
        self._text_t = 0.0
        self._text_agent: str | None = None
        self._text_task: asyncio.Future[None] | None = None
        self._publishing = asyncio.Lock()  # messages leave in the order of the events

    async def emit(self, event: Event) -> None:
        if isinstance(event, TextDeltaEvent):
            if self._text and event.agent_id != self._text_agent:
                await self._publish_text()
            if not self._text:
                self._text_offset, self._text_t, self._text_agent = len(self.answer), time.monotonic(), event.agent_id
                asyncio.get_running_loop().call_soon(self._publish_text_soon)
            self._text.append(event.text)
            self.answer += event.text
            self._dirty = True
            return
        await self._publish_text()
        data = save_event(event)
        self.seq += 1
        self._pending.append(
            Step(run_id=self.run_id, seq=self.seq, kind=event.kind, agent_id=event.agent_id or "", data=data)
        )
        self._wake.set()
        await self._publish({"seq": self.seq, "event": data, "t": time.monotonic()})

    def _publish_text_soon(self) -> None:
        self._text_task = asyncio.ensure_future(self._publish_text())

    async def _publish_text(self) -> None:
        if not self._text:
            return
        text, self._text = "".join(self._text), []
        event = save_event(TextDeltaEvent(agent_id=self._text_agent, text=text))
        # ``offset`` places the text in the answer, for a listener that read part of it from the database.
        await self._publish({"seq": self.seq, "event": event, "t": self._text_t, "offset": self._text_offset})

    async def _publish(self, message: dict[str, object]) -> None:
        # ``t`` (monotonic) is when the event left the engine, to measure delivery delay.
        if self._layer is not None:
            async with self._publishing:
                await self._layer.group_send(
                    group_name(self.run_id), {"type": "run.event", "run": self.run_id.hex, **message}
                )

    async def _write_loop(self) -> None:
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), FLUSH_SECONDS)
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        steps, self._pending = self._pending, []
        answer, dirty, self._dirty = self.answer, self._dirty, False
        if steps or dirty:
            await sync_to_async(_save, thread_sensitive=True)(self.run_id, steps, answer if dirty else None)

    async def close(self) -> None:
        await self._publish_text()
        self._closed = True
        self._wake.set()
        await self._writer
        await self.flush()


def _save(run_id: uuid.UUID, steps: list[Step], answer: str | None) -> None:
    with transaction.atomic():
        if steps:
            Step.objects.bulk_create(steps)
        if answer is not None:
            Run.objects.filter(pk=run_id).update(answer=answer)


def _history(run: Run) -> tuple[EngineMessage, ...]:
    """The conversation up to this run's user message, as the main model reads it."""
    request = Message.objects.get(run=run, role="user")
    prior = Message.objects.filter(conversation_id=run.conversation_id, pk__lt=request.pk).order_by("pk")
    out = [
        EngineMessage(role="user" if m.role == "user" else "assistant", content=m.content)
        for m in prior
        if m.content.strip()
    ]
    return (*out, EngineMessage.user(request.content))


def toolbox_for(organisation_id: int) -> Toolbox:
    """The tools a run of this organisation can be given (web and code only when configured)."""
    knowledge = OrgKnowledge(organisation_id)
    return Toolbox(knowledge=knowledge, factories=tool_factories(knowledge))


def _capped(ledger: UsageLedger | None, cost_cap_eur: float | None) -> UsageLedger | None:
    """The run's category ledger, with its cost cap (a scheduled task's) checked first."""
    if cost_cap_eur is None:
        return ledger
    cap = CostCap(cost_cap_eur)
    return cap if ledger is None else Ledgers(cap, ledger)


async def execute_run(run_id: uuid.UUID, cost_cap_eur: float | None = None) -> None:
    """Execute one run to its end and save its outcome; never raises for what happens inside.

    Only the process that claims the run executes it: one that has ended or that another process
    holds is left alone.
    """
    if not await sync_to_async(leases.claim)(run_id):
        return
    run = await Run.objects.select_related("organisation", "api_key").aget(pk=run_id)
    token = CancelToken()
    _tokens[run_id] = token
    if run.stop_requested:
        token.cancel("user")
    recorder = Recorder(run_id)
    watch = leases.Watch(run_id, token)
    await watch.start()
    ctx = RunContext(
        catalogue=providers.catalogue(),
        models=providers.resolve,
        toolbox=toolbox_for(run.organisation_id),
        policy=await sync_to_async(policy_for)(run.organisation, run.api_key),  # reads the settings' rows
        emit=recorder.emit,
        cancel=token,
        ledger=_capped(await sync_to_async(ledger_for)(run.organisation_id, run.category), cost_cap_eur),
        electricity_zone=settings.ELECTRICITY_ZONE,
    )
    status, error, rounds = "error", "", 0
    try:
        history = await sync_to_async(_history)(run)
        level = run.level if run.level in LEVELS else None
        request = RunRequest(messages=history, model=run.model, level=level, resources=tuple(run.resources))
        outcome = await run_chat(request, ctx)
        status, rounds, error = outcome.status, outcome.rounds, outcome.error or ""
    except RequestRefused as e:
        error = str(e)
    except Exception:
        log.exception("run %s failed", run_id)
        error = "The assistant failed unexpectedly; what it had written so far is kept."
    finally:
        await watch.close()
        _tokens.pop(run_id, None)
        await recorder.close()
        await sync_to_async(_finish)(run_id, status, error, rounds, recorder.answer, ctx)
        if recorder._layer is not None:
            await recorder._layer.group_send(
                group_name(run_id), {"type": "run.finished", "run": run_id.hex, "status": status}
            )


def _finish(run_id: uuid.UUID, status: str, error: str, rounds: int, answer: str, ctx: RunContext) -> None:
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status != "running":
            return  # failed meanwhile by a reaper that took this process for dead: that stands
        run.status = status
        run.error = error
        run.rounds = rounds
        run.answer = answer
        run.set_sources(ctx.sources.values())
        run.usage = ctx.usage.as_dict()
        run.cost_eur = ctx.usage.cost_eur
        run.finished = timezone.now()
        run.save()
        if answer.strip():
            Message.objects.create(conversation_id=run.conversation_id, role="assistant", content=answer, run=run)
