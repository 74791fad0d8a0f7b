"""Claiming a run, renewing its lease, Stop from any process, and failing runs whose executor died.

The process that executes a run first claims it (``claim_read``: one ``Lease`` row per run, so a run a
queue delivers twice is executed once), then, while the run goes on, ``Watch`` does three things:

- it reads the shared ``Run.stop_requested`` flag every ``STOP_POLL_SECONDS`` (the flags of every run the process
  executes in one query: ``_Poller``), and with it ``Run.delegation_answer``, the user's answer to a question the run
  asked (``ask``: a delegation over its cap), which ``broadcast_answer`` also sends to the same group;
- it listens on the run's channel-layer group ``stop_<hex>``, where ``broadcast_stop`` sends Stop
  from whichever process received it (a web server, the API): the run hears it at once; a stop whose cause names
  an agent (``Cause.agent_id``) stops that agent alone (``CancelToken.stop_agent``), its run going on;
- it renews the lease every ``RUNS_HEARTBEAT_SECONDS`` (with the others', in one statement).

Both Stop paths feed the engine's ``CancelToken``: the flag catches a broadcast sent before the run
listened. A lease not renewed for ``RUNS_LEASE_SECONDS`` means its process died (a worker killed, a
machine lost): ``reap`` marks the run failed, keeping its steps, its partial answer, what its
saved usage events cost and what its saved steps say it read (its sources), releases what it held on its
category (through ``accounting``), and tells its pages (``areap``). Every Celery worker reaps (``workers.runner``); in the embedded default ``recover_runs``
fails, at the server's start, the runs the previous one left running.

Used wherever a run executes (the web server's event loop in the embedded default, a worker when
scaled out): none of it is Celery code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
import weakref
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from assistant.engine.cancel import STOPPED_BY_USER, CancelToken
from assistant.engine.causes import Cause
from assistant.engine.estimate import Answer, Question
from assistant.engine.events import ErrorEvent, Source, sources_read, usage_from
from assistant.engine.usage import RunUsage

from . import accounting, ends, groups
from .commits import lazy_statement
from .ends import RunEnded
from .messages import RunAnswer, RunStop, group_send
from .models import Lease, Message, Run, Step
from .steps import events_of, save_event

log = logging.getLogger(__name__)

STOP_POLL_SECONDS = 0.5
# Why a run no process executes is failed (``Run.error`` is the English, an ``error`` step says it as data).
DIED = Cause(code="process_died")
NOT_TAKEN = Cause(code="not_taken")
NOT_QUEUED = Cause(code="not_queued")


def executor_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def claim_read(run_id: uuid.UUID) -> bool | None:
    """Take a running run for this process: None when it has ended or another process has it, else its
    ``stop_requested`` flag as it stood when it was claimed (Stop can come before the run starts).

    One statement, its own transaction (not waiting for the disk: ``commits.lazy_statement``): the lease's row is
    inserted only if the run is running, and only if no process holds it (the lease's primary key is the run: of two
    processes claiming at once, one inserts)."""
    close_old_connections()  # a worker's connection may have outlived the database's restart
    now = timezone.now()
    quote = connection.ops.quote_name
    fields = {f.name: f for f in Lease._meta.concrete_fields}
    runs = quote(Run._meta.db_table)
    run_pk = Run._meta.pk.get_db_prep_value(run_id, connection)
    # Lazy: a lease lost with the database server's crash is a run lost with it too (``commits``).
    with lazy_statement(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(Lease._meta.db_table)} (run_id, executor, claimed, heartbeat)"
            f" SELECT %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM {runs}"
            " WHERE id = %s AND status = %s) ON CONFLICT (run_id) DO NOTHING"
            f" RETURNING (SELECT stop_requested FROM {runs} WHERE id = %s)",
            [
                fields["run"].get_db_prep_value(run_id, connection),
                executor_name(),
                fields["claimed"].get_db_prep_value(now, connection),
                fields["heartbeat"].get_db_prep_value(now, connection),
                run_pk,
                Run.Status.RUNNING.value,
                run_pk,
            ],
        )
        found = cursor.fetchone()
    return None if found is None else bool(found[0])


async def broadcast_stop(run_id: uuid.UUID, cause: Cause = STOPPED_BY_USER) -> None:
    """Tell the process executing the run, wherever it is, to stop it now, with ``cause``."""
    layer = get_channel_layer()
    if layer is not None:
        stop: RunStop = {"type": "run.stop", "cause": cause.model_dump(mode="json")}
        await group_send(layer, groups.stop_group(run_id), stop)


async def broadcast_answer(run_id: uuid.UUID, question: str, launch: bool) -> None:
    """Tell the process executing the run, wherever it is, the user's answer to its ``question``."""
    layer = get_channel_layer()
    if layer is not None:
        answer: RunAnswer = {"type": "run.answer", "question": question, "launch": launch}
        await group_send(layer, groups.stop_group(run_id), answer)


class Watch:
    """While a run executes: Stop from the flag or the broadcast goes to its token; its lease is renewed; the user's
    answers to its questions reach ``ask``."""

    def __init__(self, run_id: uuid.UUID, token: CancelToken) -> None:
        self.run_id = run_id
        self.token = token
        self._questions: dict[str, asyncio.Future[bool]] = {}
        self._layer = get_channel_layer()
        self._channel = ""
        self._tasks: list[asyncio.Future[None]] = []
        self._poller: _Poller | None = None

    async def start(self, *, flag_read: bool = False) -> None:
        """Listen, then poll. Joined first: a Stop sent before is in the flag, which is read at once; ``flag_read``
        when the caller reads the flag itself after this (the first poll then waits its turn)."""
        if self._layer is not None:
            self._channel = await self._layer.new_channel()
            await self._layer.group_add(groups.stop_group(self.run_id), self._channel)
            self._tasks.append(asyncio.ensure_future(self._listen()))
        if not flag_read:
            self.heard(await sync_to_async(_flags)([self.run_id]))
        self._poller = _Poller.of_this_loop()
        self._poller.add(self)

    async def close(self) -> None:
        if self._poller is not None:
            await self._poller.remove(self)
            self._poller = None
        for task in self._tasks:
            await _end(task)
        if self._layer is not None:
            await self._layer.group_discard(groups.stop_group(self.run_id), self._channel)

    def heard(self, flags: dict[uuid.UUID, tuple[str, bool, Any]]) -> None:
        """What a read of the flags says of this run: stopped on request, or no longer running (failed by a reaper
        that thought this process dead), or gone; and the user's answer to its question, if one was given."""
        status, stop_requested, answer = flags.get(self.run_id, ("", False, {}))
        if status != Run.Status.RUNNING or stop_requested:
            self.token.cancel(STOPPED_BY_USER)
        if isinstance(answer, dict) and answer:
            self.answered(answer.get("question"), answer.get("launch"))

    async def ask(self, question: Question) -> Answer:
        """Wait for the user's answer to ``question`` (its ``key`` is what the answer names: the page's form, the flag,
        the broadcast); the engine ends the wait when it is too long, or when the run stops."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._questions[question.key] = future
        try:
            return "launch" if await future else "decline"
        finally:
            self._questions.pop(question.key, None)

    def answered(self, key: object, launch: object) -> None:
        """The user answered the question asked under ``key`` (one this run is not waiting for is ignored)."""
        future = self._questions.get(key) if isinstance(key, str) else None
        if future is not None and not future.done() and isinstance(launch, bool):
            future.set_result(launch)

    async def _listen(self) -> None:
        assert self._layer is not None
        while True:
            try:
                message = await self._layer.receive(self._channel)
            except Exception:
                # Redis away for a moment: listen again (the flag still stops the run meanwhile).
                log.exception("the stop broadcast of run %s could not be read", self.run_id)
                await asyncio.sleep(STOP_POLL_SECONDS)
                continue
            if message.get("type") == "run.stop":
                _stop(self.token, _stop_cause(message.get("cause")))
            elif message.get("type") == "run.answer":
                self.answered(message.get("question"), message.get("launch"))


def _stop(token: CancelToken, cause: Cause) -> bool:
    """Stop the run, or the one agent of it that ``cause`` names (``agent_id``); whether something was stopped."""
    if cause.agent_id is not None:
        return token.stop_agent(cause.agent_id, cause)
    if token.cancelled:
        return False
    token.cancel(cause)
    return True


def _stop_cause(data: object) -> Cause:
    """The cause a stop broadcast carries; Stop's when it carries none a run is stopped with."""
    try:
        cause = Cause.model_validate(data)
    except ValueError:
        return STOPPED_BY_USER
    return cause if cause.is_stop else STOPPED_BY_USER


class _Poller:
    """The flags and leases of every run this event loop executes, read and renewed together: one query each
    ``STOP_POLL_SECONDS`` whatever the number of runs (with 50 runs at once, one query a run was 100 trips a second
    to the database's thread, competing with the runs' own), and one renewal each ``RUNS_HEARTBEAT_SECONDS``.

    A run that joins waits for the next poll (it read its flag as it was claimed, or as its watch started); its
    lease was written as it was claimed, and is renewed with the others' within a heartbeat."""

    _by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Poller] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self.watches: dict[uuid.UUID, Watch] = {}
        self.task: asyncio.Future[None] | None = None
        self.stopping: Cause | None = None
        """Set when this loop shuts down (``shut_down``): a run that starts in it afterwards is stopped at once."""

    @classmethod
    def of_this_loop(cls) -> _Poller:
        loop = asyncio.get_running_loop()
        poller = cls._by_loop.get(loop)
        if poller is None:
            poller = cls._by_loop[loop] = cls()
        return poller

    def add(self, watch: Watch) -> None:
        self.watches[watch.run_id] = watch
        if self.stopping is not None:
            _stop(watch.token, self.stopping)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._poll())

    async def remove(self, watch: Watch) -> None:
        if self.watches.get(watch.run_id) is watch:
            del self.watches[watch.run_id]
        if not self.watches and self.task is not None:
            task, self.task = self.task, None
            await _end(task)

    async def _poll(self) -> None:
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(STOP_POLL_SECONDS)
            watches = list(self.watches.values())
            renew = time.monotonic() - renewed >= settings.RUNS_HEARTBEAT_SECONDS
            try:
                flags = await sync_to_async(_flags)([w.run_id for w in watches], renew=renew)
            except Exception:
                # The database away for a moment: try again; a lease left unrenewed too long fails the run.
                log.exception("could not read the flags or renew the leases of %d runs", len(watches))
                continue
            if renew:
                renewed = time.monotonic()
            for watch in watches:
                watch.heard(flags)


def stop_here(run_id: uuid.UUID | None, cause: Cause) -> int:
    """Stop at once, with ``cause``, the run this event loop executes (its watch is open), or every one (``run_id``
    None); how many were stopped. A cause naming an agent (``agent_id``) stops that agent of the run alone."""
    try:
        poller = _Poller._by_loop.get(asyncio.get_running_loop())
    except RuntimeError:
        return 0
    if poller is None:
        return 0
    watches = list(poller.watches.values()) if run_id is None else [poller.watches.get(run_id)]
    return sum(_stop(w.token, cause) for w in watches if w is not None)


def shut_down(cause: Cause) -> int:
    """Stop, with ``cause``, every run this event loop executes, and every run it starts from now on (as soon as its
    watch starts: one being claimed now, a task a worker had already received); how many were stopped now. The
    shutdown is this loop's (a worker's runs' loop), as the watches are: another loop is not shutting down."""
    poller = _Poller.of_this_loop()
    poller.stopping = cause
    return sum(_stop(w.token, cause) for w in list(poller.watches.values()))


def answer_here(run_id: uuid.UUID, question: str, launch: bool) -> bool:
    """Give the run this event loop executes (its watch is open) the user's answer to its ``question``; whether it
    executes here."""
    try:
        poller = _Poller._by_loop.get(asyncio.get_running_loop())
    except RuntimeError:
        return False
    watch = poller.watches.get(run_id) if poller is not None else None
    if watch is None:
        return False
    watch.answered(question, launch)
    return True


def executes_here(run_id: uuid.UUID) -> bool:
    """Whether this event loop executes the run (its watch is open): its process lives, then, and renews its lease;
    nothing in the database says more."""
    try:
        poller = _Poller._by_loop.get(asyncio.get_running_loop())
    except RuntimeError:
        return False
    return poller is not None and run_id in poller.watches


def _flags(run_ids: list[uuid.UUID], *, renew: bool = False) -> dict[uuid.UUID, tuple[str, bool, Any]]:
    """Each run's status, ``stop_requested`` flag and ``delegation_answer`` (a run not there is left out); with
    ``renew``, their leases' heartbeats set to now first."""
    if renew:
        Lease.objects.filter(run_id__in=run_ids).update(heartbeat=timezone.now())
    rows = Run.objects.filter(pk__in=run_ids).values_list("pk", "status", "stop_requested", "delegation_answer")
    return {pk: (status, stop_requested, answer) for pk, status, stop_requested, answer in rows}


async def _end(task: asyncio.Future[None]) -> None:
    """Cancel ``task`` and wait for it to end, cancelling it again each ``STOP_POLL_SECONDS`` while it goes on.

    Once is not always enough: Python 3.11's ``asyncio.wait_for``, which the Redis client sends each command with,
    drops a cancellation that comes as the command was sent (CPython gh-86296), and the layer's ``receive`` then
    waits for the next message, which never comes: the run would never end (and its worker, told to shut down,
    never exit)."""
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=STOP_POLL_SECONDS)
    # A receive cancelled in the Redis client may end in its own TimeoutError: nothing to report.
    if not task.cancelled():
        with contextlib.suppress(Exception):
            task.result()


# The steps a run's usage is rebuilt from: each billed call's usage, and each failed call.
USAGE_STEPS = ("usage", "model_call_failed")


def usage_of(steps: Iterable[Step]) -> RunUsage:
    """A run's usage rebuilt from its saved usage events (each model call, agents included, once) and its failed
    calls (``USAGE_STEPS``)."""
    return usage_from(events_of(steps))


# The steps that can say what was read: the main model's tool results, the agents' actions and their ends.
SOURCE_STEPS = ("tool_result", "agent_action", "agent_finished")


def sources_of(steps: Iterable[Step]) -> list[Source]:
    """A run's sources rebuilt from its saved steps (``SOURCE_STEPS``), as the engine gathers them."""
    return sources_read(events_of(steps))


def reap(now: datetime | None = None) -> list[uuid.UUID]:
    """Fail the runs whose process died (lease expired) or, scaled out, that no worker took in time."""
    now = now or timezone.now()
    lease_cutoff = now - timedelta(seconds=settings.RUNS_LEASE_SECONDS)
    died = Run.objects.filter(status=Run.Status.RUNNING, lease__heartbeat__lt=lease_cutoff).values_list("pk", flat=True)
    failed = [pk for pk in died if fail(pk, DIED, now, lease_cutoff)]
    if settings.RUNS_EXECUTOR == "celery":
        queue_cutoff = now - timedelta(seconds=settings.RUNS_QUEUE_SECONDS)
        waiting = Run.objects.filter(status=Run.Status.RUNNING, lease__isnull=True, created__lt=queue_cutoff)
        failed += [pk for pk in waiting.values_list("pk", flat=True) if fail(pk, NOT_TAKEN, now, None)]
    return failed


def fail(
    run_id: uuid.UUID, cause: Cause, now: datetime, lease_cutoff: datetime | None, message: str | None = None
) -> bool:
    """Fail a running run that no process holds (none ever did, or its lease is older than ``lease_cutoff``);
    ``message``: its error in English, when more than ``cause.english()`` (a refusal's own sentence)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id, status=Run.Status.RUNNING).first()
        lease = Lease.objects.filter(run_id=run_id).first()
        # Checked again under the lock: the run may have ended, or its process renewed the lease.
        if run is None or (lease is not None and (lease_cutoff is None or lease.heartbeat >= lease_cutoff)):
            return False
        abandon(run, cause, now, message)
    log.warning("run %s failed: %s", run_id, cause.code)
    return True


def _executor_gone(executor: str) -> bool:
    """Whether the process named ``host:pid`` on this machine no longer exists (the server that executed it stopped)."""
    host, _, pid = executor.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, owned by another user
        return False
    return False


def fail_if_dead(run_id: uuid.UUID, now: datetime | None = None, *, conversation_id: int | None = None) -> bool:
    """Answer from a running run's lease whether its process is alive; fail it now (as the reaper would) if not.

    Dead: its lease was not renewed for ``RUNS_LEASE_SECONDS``; in the embedded default, also at once when the
    process its lease names, on this machine, no longer exists (the web server that executed it stopped); or no
    process ever claimed it in time. True when this call failed the run (then tell its pages: ``announce_failed``).
    With ``conversation_id``, only a run of that conversation is looked at (a page asks about its own runs only).
    """
    now = now or timezone.now()
    runs = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING)
    if conversation_id is not None:
        runs = runs.filter(conversation_id=conversation_id)
    row = runs.values_list("created", "lease__heartbeat", "lease__executor").first()  # one query
    if row is None:
        return False
    created, heartbeat, executor = row
    lease_cutoff = now - timedelta(seconds=settings.RUNS_LEASE_SECONDS)
    if heartbeat is None:
        waits = settings.RUNS_QUEUE_SECONDS if settings.RUNS_EXECUTOR == "celery" else settings.RUNS_LEASE_SECONDS
        return created < now - timedelta(seconds=waits) and fail(run_id, NOT_TAKEN, now, None)
    if heartbeat < lease_cutoff:
        return fail(run_id, DIED, now, lease_cutoff)
    if settings.RUNS_EXECUTOR != "celery" and _executor_gone(executor or ""):
        # Checked under the run's lock in ``fail``: a cutoff just after the last heartbeat makes it "expired".
        return fail(run_id, DIED, now, heartbeat + timedelta(microseconds=1))
    return False


def fail_all_running(cause: Cause, now: datetime | None = None) -> list[uuid.UUID]:
    """Fail every running run, leases or not: when no process can be executing any (the embedded default's start)."""
    now = now or timezone.now()
    failed = []
    for run_id in Run.objects.filter(status=Run.Status.RUNNING).values_list("pk", flat=True):
        with transaction.atomic():
            run = Run.objects.select_for_update().filter(pk=run_id, status=Run.Status.RUNNING).first()
            if run is None:
                continue
            abandon(run, cause, now)
        failed.append(run_id)
    return failed


def abandon(run: Run, cause: Cause, now: datetime, message: str | None = None) -> None:
    """End a running run that no process executes any more as failed, with what its saved steps record: the cost of
    its calls, what it read, and its partial answer as the assistant's message; a last ``error`` step says why. In a
    transaction holding its row."""
    usage = usage_of(run.steps.filter(kind__in=USAGE_STEPS).order_by("seq"))
    last = run.steps.order_by("-seq").values_list("seq", flat=True).first() or 0
    message = message or cause.english()
    why = save_event(ErrorEvent(message=message, cause=cause))
    # Should the process be alive after all and save a step meanwhile, its step is kept and this one dropped.
    Step.objects.bulk_create([Step(run=run, seq=last + 1, kind="error", data=why)], ignore_conflicts=True)
    run.status, run.error, run.finished = "error", message, now
    run.usage, run.cost_eur = usage.as_dict(), usage.cost_eur
    run.set_sources(sources_of(run.steps.filter(kind__in=SOURCE_STEPS)))
    run.save(update_fields=["status", "error", "finished", "usage", "cost_eur", "sources"])
    # Its calls will never settle: what it held on its category goes back with its lease.
    accounting.accounting().release(run.pk)
    if run.answer.strip():
        Message.objects.create(conversation_id=run.conversation_id, role="assistant", content=run.answer, run=run)
    ends.announce(RunEnded(run, None, None))


async def areap() -> list[uuid.UUID]:
    """``reap``, then tell the pages following each failed run that it ended."""
    failed = await sync_to_async(reap)()
    await announce_failed(failed)
    return failed


async def announce_failed(failed: list[uuid.UUID]) -> None:
    for run_id in failed:
        await groups.announce_finished(run_id, "error")
