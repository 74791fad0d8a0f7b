"""Launching, executing and stopping runs.

``execute_run`` is the one path a run takes, wherever it executes: the web server's event loop in
the embedded default (``launch``), a Celery worker when scaled out (``RUNS_EXECUTOR=celery``: the
executor the ``workers`` app registers). It feeds the engine's events to a ``Recorder`` that saves
them as steps and publishes them to the run's channel-layer group, and it feeds the engine's
``CancelToken`` from this process (``request_stop``) and, through ``leases.Watch``, from the shared
``Run.stop_requested`` flag and a broadcast on the channel layer, so that Stop reaches a run
wherever it runs. The process executing a run holds its lease; a run whose process dies is failed
by ``leases.reap``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q, QuerySet
from django.db.models.signals import post_save
from django.utils import timezone
from redis.exceptions import RedisError

from assistant.catalogue import snapshot
from assistant.connectors import directory as connectors
from assistant.engine.cancel import STOPPED_BY_USER, CancelToken
from assistant.engine.causes import Cause
from assistant.engine.errors import RequestRefused
from assistant.engine.events import ErrorEvent, Event
from assistant.engine.loop import run_chat
from assistant.engine.policy import LEVELS, Policy, RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.tables import TableCatalogue
from assistant.engine.tools import Toolbox
from assistant.engine.types import Message as EngineMessage
from assistant.engine.usage import CostCap, Ledgers, UsageLedger
from assistant.knowledge.backend import OrgKnowledge
from assistant.knowledge.tools import tool_factories
from assistant.orgs.services import policy_for

from . import accounting, groups, leases
from .models import Conversation, Message, Run
from .recorder import Recorder
from .steps import AgentEnd

log = logging.getLogger(__name__)

INFRASTRUCTURE = (DatabaseError, RedisError, OSError)
"""What fails a run with the cause ``infrastructure``: a service it needs (the ledger's and the steps' database, the
channel layer's Redis, a connection), rather than a tool or the engine."""

Executor = Callable[[uuid.UUID, float | None], Coroutine[Any, Any, None]]
"""Hands a run (with its cost cap) to where it executes: awaited in this process's event loop."""

# Runs executing in this process: their tasks (kept alive) and their cancel tokens.
_tasks: dict[uuid.UUID, asyncio.Task[None]] = {}
_tokens: dict[uuid.UUID, CancelToken] = {}
# What intake read for the runs it created in this process (``hand_over``), taken by ``execute_run`` as they start
# here; the oldest are dropped past ``HANDED_MAX`` (a run executed elsewhere, or never launched), and a run with
# nothing handed reads it all from the database.
_handed: OrderedDict[uuid.UUID, _Handed] = OrderedDict()
HANDED_MAX = 256
# What the runs launched here start from (``launch``), taken by ``execute_run`` as they start: what intake handed
# over, or the policy the run was checked with.
_starting: dict[uuid.UUID, _Handed | Policy] = {}
# What the callers that launched runs here hear of them (``launch``'s ``heard``), taken by ``execute_run``.
_hearing: dict[uuid.UUID, Heard] = {}
# Called with the conversation's id once a run has ended and its end is announced, wherever it executed
# (``queue`` registers the start of the conversation's next queued message).
_after_run: list[Callable[[int], Coroutine[Any, Any, None]]] = []
# How a ``RUNS_EXECUTOR`` other than ``embedded`` (this process) executes a run, as the app that registers it says.
_executors: dict[str, Executor] = {}
# Set by ``stop_all`` (the process is shutting down): a run claimed afterwards is stopped with it at once.
_stopping: Cause | None = None


def register_executor(name: str, executor: Executor) -> None:
    """Execute runs with ``executor`` when ``RUNS_EXECUTOR`` is ``name`` (``workers`` registers ``celery``)."""
    _executors[name] = executor


def after_run(hook: Callable[[int], Coroutine[Any, Any, None]]) -> None:
    """Await ``hook(conversation_id)`` after each run ends (in the process that executed it)."""
    if hook not in _after_run:
        _after_run.append(hook)


@dataclass(slots=True)
class _Handed:
    """What intake read for a run, as it saved it: the run (its organisation and key loaded), the policy it was
    checked with, its category's ledger."""

    run: Run
    policy: Policy
    ledger: UsageLedger | None
    history: tuple[EngineMessage, ...] | None = None
    """The run's history as ``_history`` would read it, when intake knew it (a conversation it saved with the run)."""


def hand_over(
    run: Run, policy: Policy, ledger: UsageLedger | None, history: tuple[EngineMessage, ...] | None = None
) -> None:
    """Keep what intake read for ``run`` (saved), for its execution in this process (``_prepare``)."""
    _handed[run.pk] = _Handed(run, policy, ledger, history)
    while len(_handed) > HANDED_MAX:
        _handed.popitem(last=False)


@dataclass(slots=True)
class Heard:
    """What a caller that launched a run hears of it when it executes in this process (``launch``): every event its
    recorder saved as a step, in order, as the events themselves (``events``), and the run as this process saved its
    end after them (``run``; then ``complete``: the events are the run's steps, and neither they nor the run need be
    read back)."""

    events: list[Event] = field(default_factory=list)
    run: Run | None = None

    @property
    def complete(self) -> bool:
        return self.run is not None


def launch(
    run_id: uuid.UUID, cost_cap_eur: float | None = None, *, policy: Policy | None = None, heard: Heard | None = None
) -> asyncio.Task[None]:
    """Execute a run in this process's event loop, or on a Celery worker (``RUNS_EXECUTOR=celery``).

    Either way it goes on when the browser goes away; ``cost_cap_eur`` caps what it may cost. ``policy``: the one
    the run was checked with at intake, which a run executing in this process then does not read again (intake
    hands it over, with the run and its ledger: ``hand_over``). ``heard``: filled with the run's events when it
    executes here (else left incomplete).
    """
    name = settings.RUNS_EXECUTOR
    executor = execute_run if name == "embedded" else _executors.get(name)
    if executor is None:
        raise ImproperlyConfigured(f"No executor is registered for RUNS_EXECUTOR={name!r}.")
    handed = _handed.pop(run_id, None)
    if executor is execute_run and handed is not None:
        if policy is not None:
            handed.policy = policy
        _starting[run_id] = handed
    elif executor is execute_run and policy is not None:
        _starting[run_id] = policy
    if executor is execute_run and heard is not None:
        _hearing[run_id] = heard
    # A fresh context: the run must not inherit the request's (its thread executor ends with it).
    task = asyncio.get_running_loop().create_task(executor(run_id, cost_cap_eur), context=contextvars.Context())
    _tasks[run_id] = task
    task.add_done_callback(lambda _: (_tasks.pop(run_id, None), _hearing.pop(run_id, None)))
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
        token.cancel(STOPPED_BY_USER)
    if updated:
        await leases.broadcast_stop(run_id)
    return bool(updated)


def stop_all(cause: Cause) -> int:
    """Stop every run executing in this process, with ``cause``, as Stop does (a worker shutting down stops its
    runs with ``server_shutdown``: each ends at once with what it had, its calls aborted and billed as cut), and every run
    that starts in it from now on (one being claimed as this was called, a task the worker had already received):
    each is stopped as soon as it is claimed. Call it in the runs' event loop; returns how many were stopped."""
    global _stopping
    _stopping = cause
    tokens = [t for t in _tokens.values() if not t.cancelled]
    for token in tokens:
        token.cancel(cause)
    return len(tokens)


def turns(conversation_id: int, run: Run | None = None) -> QuerySet[Message]:
    """A conversation's messages as the main model reads them, in order: first those saved with no run (an API
    client's earlier messages and system prompt, saved with the conversation), then each turn's in the order their
    runs started (a queued message's text was saved before the answer it waited for); superseded turns (edited or
    regenerated) and queued messages left out. With ``run``: the turns before it, then its own user message."""
    current = Q(run__replaced_by__isnull=True)
    if run is not None:
        current = (current & Q(run__created__lt=run.created)) | Q(run_id=run.pk, role="user")
    return (
        Message.objects.filter(conversation_id=conversation_id, queued=False)
        .filter(Q(run__isnull=True) | current)
        .order_by(F("run__created").asc(nulls_first=True), "pk")
    )


def _history(run: Run) -> tuple[EngineMessage, ...]:
    """The conversation up to this run's user message, as the main model reads it (``turns``), in one query."""
    rows = turns(run.conversation_id, run).values_list("run_id", "role", "content")
    out: list[EngineMessage] = []
    request: list[str] = []
    for run_id, role, content in rows:
        if run_id == run.pk and role == "user":
            request.append(content)
        elif content.strip():
            out.append(EngineMessage(role="user" if role == "user" else "assistant", content=content))
    if len(request) != 1:
        raise (Message.DoesNotExist if not request else Message.MultipleObjectsReturned)(
            f"run {run.pk} has {len(request)} user messages"
        )
    return (*out, EngineMessage.user(request[0]))


def toolbox_for(organisation_id: int, tables: TableCatalogue | None = None) -> Toolbox:
    """The tools a run of this organisation can be given (web and code only when configured, its connectors; the table tools
    for the bases ``tables`` lists: none without it, as the composer's and the API's checks of web and code)."""
    knowledge = OrgKnowledge(organisation_id)
    factories = tool_factories(knowledge, None if tables is None else (knowledge, tables))
    return Toolbox(
        knowledge=knowledge,
        factories=factories,
        connectors=connectors.connector_source(organisation_id),
    )


async def run_toolbox(organisation_id: int) -> Toolbox:
    """A run's toolbox: ``toolbox_for`` with the table tools for the bases that hold tables now."""
    tables = await sync_to_async(OrgKnowledge(organisation_id).catalogue)()
    return toolbox_for(organisation_id, tables)


def _capped(ledger: UsageLedger | None, cost_cap_eur: float | None) -> UsageLedger | None:
    """The run's category ledger, with its cost cap (a scheduled task's) checked first."""
    if cost_cap_eur is None:
        return ledger
    cap = CostCap(cost_cap_eur)
    return cap if ledger is None else Ledgers(cap, ledger)


@dataclass(slots=True)
class _Prepared:
    """What a claimed run starts from, read from the database in one go: the run, its category's ledger, the tables
    its toolbox offers, the engine's policy, and its history (or why it could not be read)."""

    run: Run
    ledger: UsageLedger | None
    tables: TableCatalogue
    policy: Policy
    history: tuple[EngineMessage, ...] | Exception


def _prepare(run_id: uuid.UUID, handed: _Handed | Policy | None = None) -> _Prepared | None:
    """Claim the run (None: it has ended or another process has it), then read what it starts from: what intake did
    not hand over (``handed``: the run, its policy and its ledger, or the policy alone)."""
    stop_requested = leases.claim_read(run_id)
    if stop_requested is None:
        return None
    known: tuple[EngineMessage, ...] | None = None
    if isinstance(handed, _Handed):
        run, ledger, policy, known = handed.run, handed.ledger, handed.policy, handed.history
        # Only Stop moves a running run's row before it starts (its status is what the claim checked).
        run.stop_requested = stop_requested
    else:
        run = Run.objects.select_related("organisation", "api_key", "conversation__user").get(pk=run_id)
        ledger = accounting.accounting().ledger(run.organisation_id, run.category, run_id)
        policy = handed or policy_for(run.organisation, run.api_key)  # reads the settings' rows
    tables = OrgKnowledge(run.organisation_id).catalogue()
    history: tuple[EngineMessage, ...] | Exception
    try:
        history = known if known is not None else _history(run)
    except Exception as e:  # the run fails with it, as anything inside it does
        history = e
    return _Prepared(run, ledger, tables, policy, history)


async def execute_run(run_id: uuid.UUID, cost_cap_eur: float | None = None) -> None:
    """Execute one run to its end and save its outcome; never raises for what happens inside.

    Only the process that claims the run executes it: one that has ended or that another process
    holds is left alone.
    """
    token = CancelToken()
    heard = _hearing.pop(run_id, None)
    watch = leases.Watch(run_id, token)
    # Listening first, then reading the flag (in ``_prepare``): a Stop sent before or after is not missed. One trip
    # to the database's thread before the first model call, not one per read.
    await watch.start(flag_read=True)
    try:
        prepared = await sync_to_async(_prepare)(run_id, _starting.pop(run_id, None))
    except BaseException:
        await watch.close()
        raise
    if prepared is None:
        await watch.close()
        return
    run = prepared.run
    _tokens[run_id] = token
    if run.stop_requested:
        token.cancel(STOPPED_BY_USER)
    elif _stopping is not None:  # claimed after the process began shutting down (``stop_all``)
        token.cancel(_stopping)
    recorder = Recorder(run_id, heard.events if heard is not None else None)
    ctx = RunContext(
        catalogue=snapshot.catalogue(),
        models=snapshot.resolve,
        toolbox=toolbox_for(run.organisation_id, prepared.tables),
        policy=prepared.policy,
        emit=recorder.emit,
        cancel=token,
        ledger=_capped(prepared.ledger, cost_cap_eur),
        electricity_zone=settings.ELECTRICITY_ZONE,
        language=run.language or settings.LANGUAGE_CODE,
    )
    status, error, rounds = "error", "", 0
    try:
        if isinstance(prepared.history, Exception):
            raise prepared.history
        history = prepared.history
        level = run.level if run.level in LEVELS else None
        request = RunRequest(messages=history, model=run.model, level=level, resources=tuple(run.resources))
        outcome = await run_chat(request, ctx)
        status, rounds, error = outcome.status, outcome.rounds, outcome.error or ""
    except RequestRefused as e:
        error = str(e)
        with contextlib.suppress(Exception):  # said as data too, for the page; never a failure of its own
            await recorder.emit(ErrorEvent(message=error, cause=Cause(code="refused")))
    except INFRASTRUCTURE as e:  # the database, the channel layer: no tool's failure, nor the engine's
        log.exception("run %s failed: a service it needs failed", run_id)
        cause = Cause(code="infrastructure", kind=type(e).__name__)
        error = cause.english()
        with contextlib.suppress(Exception):
            await recorder.emit(ErrorEvent(message=error, cause=cause))
    except Exception:
        log.exception("run %s failed", run_id)
        cause = Cause(code="unexpected")
        error = cause.english()
        with contextlib.suppress(Exception):
            await recorder.emit(ErrorEvent(message=error, cause=cause))
    finally:
        await watch.close()
        _tokens.pop(run_id, None)
        await recorder.close()
        unsettled = accounting.take_unsettled(prepared.ledger)  # written with the run's end, in the same trip
        saved = await sync_to_async(_finish)(
            run_id, status, error, rounds, recorder.answer, ctx, unsettled, recorder.agent_ends, run
        )
        if heard is not None and saved:
            heard.run = run  # as ``_finish`` saved it
        # Its last step and answer's length, when its steps are the recorder's (a reaper that failed it meanwhile added
        # its own step: a follower then reads what it missed).
        end = {"seq": recorder.seq, "answer_length": len(recorder.answer)} if saved else {}
        await groups.announce_finished(run_id, status, **end)
        for hook in _after_run:
            try:
                await hook(run.conversation_id)
            except Exception:
                log.exception("a hook after run %s failed", run_id)


# What a run's end writes.
FINISHED_FIELDS = ["status", "error", "rounds", "answer", "sources", "usage", "cost_eur", "finished"]


def _finish(
    run_id: uuid.UUID,
    status: str,
    error: str,
    rounds: int,
    answer: str,
    ctx: RunContext,
    unsettled: Callable[[], None] | None = None,
    agent_ends: list[AgentEnd] | None = None,
    run: Run | None = None,
) -> bool:
    """Save the run's end, in one transaction with the last calls' settlements (``unsettled``, from
    ``accounting.Deferred``) and the release of what it still holds (its intake's reservation, when it ended before
    its first call); ``run``: the run as it started (its organisation and conversation loaded), which its receivers
    are handed rather than reading it again. A run failed meanwhile by a reaper that took this process for dead stays
    as the reaper left it (the settlements and the release are written anyway): False."""
    with transaction.atomic():
        if unsettled is not None:
            unsettled()
        accounting.accounting().release(run_id)
        finished = timezone.now()
        sources = [s.model_dump(mode="json") for s in ctx.sources.values()]
        values = {
            "status": status,
            "error": error,
            "rounds": rounds,
            "answer": answer,
            "sources": sources,
            "usage": ctx.usage.as_dict(),
            "cost_eur": ctx.usage.cost_eur,
            "finished": finished,
        }
        deleted = _save_end(run_id, values)
        if deleted is None:
            return False  # failed meanwhile by a reaper: that stands
        if run is None or run.pk != run_id:
            run = Run.objects.select_related("organisation", "conversation__user").get(pk=run_id)
        for name, value in values.items():
            setattr(run, name, value)
        run.agent_ends = agent_ends  # for its receivers, which then do not read its steps back
        run.conversation_deleted = deleted
        # What ``Run.save`` sends after its UPDATE: the receivers (``budgets.landings``, ``chat.deletion``) run as
        # they would, in this transaction.
        post_save.send(
            sender=Run,
            instance=run,
            created=False,
            update_fields=frozenset(FINISHED_FIELDS),
            raw=False,
            using=connection.alias,
        )
        if answer.strip():
            Message.objects.create(conversation=run.conversation, role="assistant", content=answer, run=run)
    return True


def _save_end(run_id: uuid.UUID, values: dict[str, Any]) -> bool | None:
    """Write the run's end (``values`` of ``FINISHED_FIELDS``) if it is still running, in one statement that locks
    its row: None when it is not; else whether its conversation has been deleted, as read by that statement (a
    delete erases the run's row after it, so it waits for this transaction: ``chat.deletion``)."""
    quote = connection.ops.quote_name
    fields = [f for f in Run._meta.concrete_fields if f.name in FINISHED_FIELDS]
    table, conversations = quote(Run._meta.db_table), quote(Conversation._meta.db_table)
    columns = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    params = [f.get_db_prep_save(values[f.name], connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {columns} WHERE id = %s AND status = %s RETURNING (SELECT deleted IS NOT NULL"
            f" FROM {conversations} WHERE {conversations}.id = {table}.conversation_id)",
            [*params, Run._meta.pk.get_db_prep_value(run_id, connection), "running"],
        )
        found = cursor.fetchone()
    return None if found is None else bool(found[0])
