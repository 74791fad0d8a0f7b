"""Launching, executing and stopping runs.

``execute_run(start)`` is the one path a run takes, wherever it executes, from its start (``start.RunStart``, built
once by intake and handed over as an argument): the web server's event loop in the embedded default (``launch``),
a Celery worker when scaled out (``RUNS_EXECUTOR=celery``: the executor the ``workers`` app registers hands the
run's id to a worker, whose ``execute_stored`` rebuilds the start from the database with the same function). Its
end is saved by ``end_run``, which tells the apps that react to it (``ends.run_ended``). It feeds the engine's events to a ``Recorder`` that saves
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
import functools
import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from redis.exceptions import RedisError

from assistant.catalogue import snapshot
from assistant.connectors import directory as connectors
from assistant.engine.cancel import STOPPED_BY_USER, CancelToken
from assistant.engine.catalogue import Catalogue
from assistant.engine.causes import Cause
from assistant.engine.errors import RequestRefused
from assistant.engine.estimate import DelegationCap, cap_of
from assistant.engine.events import ErrorEvent, Event, RunStatus, Source
from assistant.engine.loop import run_chat
from assistant.engine.runtime import RunContext
from assistant.engine.tables import TableCatalogue
from assistant.engine.tools import Toolbox
from assistant.engine.usage import RunUsage
from assistant.knowledge.backend import OrgKnowledge
from assistant.knowledge.tools import tool_factories
from assistant.telemetry import setup
from assistant.telemetry.spans import RunFacts, RunTrace

from . import accounting, ends, groups, growth, leases
from .ends import RunEnded
from .models import Conversation, Message, Run
from .recorder import Recorder
from .start import RunStart, read_start
from .steps import AgentEnd

log = logging.getLogger(__name__)

INFRASTRUCTURE = (DatabaseError, RedisError, OSError)
"""What fails a run with the cause ``infrastructure``: a service it needs (the ledger's and the steps' database, the
channel layer's Redis, a connection), rather than a tool or the engine."""

Executor = Callable[[RunStart], Coroutine[Any, Any, None]]
"""Hands a run's start to where it executes: awaited in this process's event loop."""

# Process state, not a run's inputs (those are its ``RunStart``, an argument from intake to the engine):
# - the runs launched in this process, kept alive until they end: their tasks, looked up by id by whoever waits for one
#   (``wait_for``: a conversation's deletion, tests), which has nothing but the id;
_tasks: dict[uuid.UUID, asyncio.Task[None]] = {}
# - how a ``RUNS_EXECUTOR`` other than ``embedded`` executes a run: set once, by the app above that implements it, in
#   its ``AppConfig.ready`` (``workers`` registers ``celery``: this app does not import it).
_executors: dict[str, Executor] = {}


def register_executor(name: str, executor: Executor) -> None:
    """Execute runs with ``executor`` when ``RUNS_EXECUTOR`` is ``name`` (``workers`` registers ``celery``)."""
    _executors[name] = executor


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


def launch(start: RunStart, *, heard: Heard | None = None) -> asyncio.Task[None]:
    """Execute a run from its start in this process's event loop, or on a Celery worker (``RUNS_EXECUTOR=celery``,
    which rebuilds its start from the database: ``start.read_start``).

    Either way it goes on when the browser goes away. ``heard``: filled with the run's events when it executes here
    (else left incomplete).
    """
    name = settings.RUNS_EXECUTOR
    if name == "embedded":
        executor: Executor = functools.partial(execute_run, heard=heard)
    elif name in _executors:
        executor = _executors[name]
    else:
        raise ImproperlyConfigured(f"No executor is registered for RUNS_EXECUTOR={name!r}.")
    run_id = start.run.pk
    # A fresh context: the run must not inherit the request's (its thread executor ends with it); only its trace
    # context goes with it, so that the run's span is the child of the caller's.
    fresh = contextvars.Context()
    setup.carry_into(fresh)
    task = asyncio.get_running_loop().create_task(executor(start), context=fresh)
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
    updated = await Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).aupdate(stop_requested=True)
    leases.stop_here(run_id, STOPPED_BY_USER)
    if updated:
        await leases.broadcast_stop(run_id)
    return bool(updated)


async def request_agent_stop(run_id: uuid.UUID, agent_id: str) -> None:
    """Stop one agent of a run, alone, wherever the run executes: at once if here, else through the broadcast the
    process executing it listens to (``leases.Watch``). An agent that has ended is left as it is."""
    cause = Cause(code="stopped_by_user", agent_id=agent_id)
    if not leases.stop_here(run_id, cause):
        await leases.broadcast_stop(run_id, cause)


def stop_all(cause: Cause) -> int:
    """Stop every run executing in this process, with ``cause``, as Stop does (a worker shutting down stops its
    runs with ``server_shutdown``: each ends at once with what it had, its calls aborted and billed as cut), and every
    run that starts in it from now on (one being claimed as this was called, a task the worker had already received):
    each is stopped as its watch starts (``leases.shut_down``). Call it in the runs' event loop (outside one, there is
    nothing to stop); returns how many were stopped."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return 0
    return leases.shut_down(cause)


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


def claim(start: RunStart) -> TableCatalogue | None:
    """Claim the run (None: it has ended, or another process has it), noting the ``stop_requested`` flag as it stood
    then on its run (Stop can come before the run starts), and read the tables its toolbox offers."""
    stop_requested = leases.claim_read(start.run.pk)
    if stop_requested is None:
        return None
    start.run.stop_requested = stop_requested  # only Stop moves a running run's row before it starts
    return OrgKnowledge(start.run.organisation_id).catalogue()


async def execute_stored(run_id: uuid.UUID, cost_cap_eur: float | None = None) -> None:
    """Execute a run another process saved (a worker's): its start read from the database (``start.read_start``),
    then ``execute_run``. A run whose start cannot be read (its request no longer passes the policy, its messages
    gone) fails at once, saying why."""
    try:
        start = await sync_to_async(read_start)(run_id, cost_cap_eur)
    except Exception as e:
        refused = isinstance(e, RequestRefused)
        if not refused:
            log.exception("run %s could not start", run_id)
        cause = (
            Cause(code="refused", kind=e.refusal.code) if isinstance(e, RequestRefused) else Cause(code="unexpected")
        )
        message = str(e) if refused else None
        if await sync_to_async(leases.fail)(run_id, cause, timezone.now(), None, message):
            await leases.announce_failed([run_id])
        return
    if start is not None:
        await execute_run(start)


async def execute_run(start: RunStart, heard: Heard | None = None) -> None:
    """Execute one run from its start to its end and save its outcome; never raises for what happens inside.

    Only the process that claims the run executes it: one that has ended or that another process holds is left
    alone. ``heard``: what a caller in this process hears of it (``Heard``).
    """
    run = start.run
    run_id = run.pk
    token = CancelToken()
    watch = leases.Watch(run_id, token)
    # Listening first, then reading the flag (as the run is claimed): a Stop sent before or after is not missed. One
    # trip to the database's thread before the first model call, not one per read.
    await watch.start(flag_read=True)
    try:
        tables = await sync_to_async(claim)(start)
    except BaseException:
        await watch.close()
        raise
    if tables is None:
        await watch.close()
        return
    if run.stop_requested:
        token.cancel(STOPPED_BY_USER)
    catalogue = snapshot.catalogue()
    recorder = Recorder(run_id, heard.events if heard is not None else None, _trace(start, catalogue, token))
    ctx = RunContext(
        catalogue=catalogue,
        models=snapshot.resolve,
        toolbox=toolbox_for(run.organisation_id, tables),
        policy=start.policy,
        emit=recorder.emit,
        cancel=token,
        ledger=start.capped_ledger,
        electricity_zone=settings.ELECTRICITY_ZONE,
        language=start.language,
        delegation_cap=_delegation_cap(start, watch),
        agent_growth=growth.growth_source(run.organisation_id),
    )
    status: RunStatus = "error"
    error, rounds = "", 0
    try:
        outcome = await run_chat(start.request, ctx, start.plan)
        status, rounds, error = outcome.status, outcome.rounds, outcome.error or ""
    except RequestRefused as e:
        error = str(e)
        with contextlib.suppress(Exception):  # said as data too, for the page; never a failure of its own
            await recorder.emit(ErrorEvent(message=error, cause=Cause(code="refused", kind=e.refusal.code)))
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
        await recorder.close()
        unsettled = accounting.take_unsettled(start.ledger)  # written with the run's end, in the same trip
        ending = Ending(status, error, rounds, recorder.answer, ctx.sources, ctx.usage, tuple(recorder.agent_ends))
        ended = await sync_to_async(end_run)(run, ending, unsettled)
        if heard is not None and ended is not None:
            heard.run = ended.run
        # Its last step and answer's length, when its steps are the recorder's (a reaper that failed it meanwhile added
        # its own step: a follower then reads what it missed).
        end = {"seq": recorder.seq, "answer_length": len(recorder.answer)} if ended is not None else {}
        await groups.announce_finished(run_id, status, **end)
        await ends.finished(run.conversation_id)  # the apps that go on from it (the conversation's queue)


def _delegation_cap(start: RunStart, watch: leases.Watch) -> DelegationCap | None:
    """What a delegation of the run may cost at most: the request's cap or the organisation's, the lowest; over it,
    the user is asked in the chat (``Watch.ask``: the answer reaches the run wherever it executes), not in the API nor
    in a scheduled task (then it is not launched)."""
    cap = cap_of(start.request.max_delegation_eur, start.policy.delegation_cap_eur)
    if cap is None:
        return None
    # The organisation's cap is asked of the user; an API client's own is a hard cap (no one to ask there anyway).
    confirm = watch.ask if start.asks_the_user else None
    return DelegationCap(cap_eur=cap, confirm=confirm, confirm_seconds=settings.DELEGATION_CONFIRM_SECONDS)


async def answer_question(run_id: uuid.UUID, question: str, launch: bool) -> bool:
    """The user's answer to a run's question (a delegation over its cap): at once if the run executes here, through
    the shared field and a broadcast wherever it executes (as Stop: ``request_stop``). False: it is not running."""
    answer = {"question": question, "launch": launch}
    updated = await Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).aupdate(delegation_answer=answer)
    leases.answer_here(run_id, question, launch)
    if updated:
        await leases.broadcast_answer(run_id, question, launch)
    return bool(updated)


def _trace(start: RunStart, catalogue: Catalogue, token: CancelToken) -> RunTrace | None:
    """The run's spans, when this process exports telemetry (``telemetry.setup``): built from its events."""
    telemetry = setup.current()
    if telemetry is None:
        return None
    run = start.run
    # The question: the last user message (a turn that continues after an API client's tools ends with their results).
    asked = next((m.content for m in reversed(start.request.messages) if m.role == "user"), "")
    question = asked if telemetry.content.captures else ""
    facts = RunFacts(
        run_id=str(run.pk),
        conversation_id=str(run.conversation_id),
        organisation=run.organisation.slug,
        category=run.category,
        level=run.level,
        model=run.model,
        question=question,
    )
    return RunTrace(telemetry, facts, catalogue, lambda: token.cancelled_at)


# What a run's end writes.
FINISHED_FIELDS = ["status", "error", "rounds", "answer", "sources", "usage", "cost_eur", "finished"]


@dataclass(frozen=True, slots=True)
class Ending:
    """How a run ended, as its execution saw it: what ``end_run`` saves."""

    status: RunStatus
    error: str
    rounds: int
    answer: str
    sources: Mapping[str, Source]
    usage: RunUsage
    agent_ends: tuple[AgentEnd, ...] = ()


def end_run(run: Run, ending: Ending, unsettled: Callable[[], None] | None = None) -> RunEnded | None:
    """Save the run's end, in one transaction with the last calls' settlements (``unsettled``, from
    ``accounting.Deferred``) and the release of what it still holds (its intake's reservation, when it ended before
    its first call), and tell the apps that react to it (``ends.run_ended``, in that transaction): returns what they
    heard. ``run``: the run as it started (its organisation and conversation loaded), updated to its end. A run failed
    meanwhile by a reaper that took this process for dead stays as the reaper left it (the settlements and the
    release are written anyway): None."""
    with transaction.atomic():
        if unsettled is not None:
            unsettled()
        accounting.accounting().release(run.pk)
        values = {
            "status": ending.status,
            "error": ending.error,
            "rounds": ending.rounds,
            "answer": ending.answer,
            "sources": [s.model_dump(mode="json") for s in ending.sources.values()],
            "usage": ending.usage.as_dict(),
            "cost_eur": ending.usage.cost_eur,
            "finished": timezone.now(),
        }
        deleted = _save_end(run.pk, values)
        if deleted is None:
            return None  # failed meanwhile by a reaper: that stands
        for name, value in values.items():
            setattr(run, name, value)
        if ending.answer.strip() and not deleted:
            Message.objects.create(conversation=run.conversation, role="assistant", content=ending.answer, run=run)
        ended = RunEnded(run, ending.agent_ends, deleted)
        ends.announce(ended)
    return ended


def _save_end(run_id: uuid.UUID, values: dict[str, Any]) -> bool | None:
    """Write the run's end (``values`` of ``FINISHED_FIELDS``) if it is still running, in one statement that locks
    its row: None when it is not; else whether its conversation has been deleted, as read by that statement (a
    delete erases the run's row after it, so it waits for this transaction: ``chat.deletion``).

    Raw SQL, on purpose: Django's ``QuerySet.update`` returns a row count, not rows (no ``RETURNING``), so the ORM
    needs two statements for this one, two round trips to the database inside the run's closing transaction (the
    conditional update, then the conversation's ``deleted`` read under the row's lock), or a locking read and a
    ``save``; it is at every run's end, while the run's row is locked and other runs' ends wait for the same
    database (SQLite: the one writer)."""
    quote = connection.ops.quote_name
    fields = [f for f in Run._meta.concrete_fields if f.name in FINISHED_FIELDS]
    table, conversations = quote(Run._meta.db_table), quote(Conversation._meta.db_table)
    columns = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    params = [f.get_db_prep_save(values[f.name], connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {columns} WHERE id = %s AND status = %s RETURNING (SELECT deleted IS NOT NULL"
            f" FROM {conversations} WHERE {conversations}.id = {table}.conversation_id)",
            [*params, Run._meta.pk.get_db_prep_value(run_id, connection), Run.Status.RUNNING.value],
        )
        found = cursor.fetchone()
    return None if found is None else bool(found[0])
