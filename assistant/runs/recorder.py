"""The recorder: a run's events saved as steps and published to its group as they happen.

Every event but a text delta becomes a ``Step`` numbered by ``seq`` (written to the database within
``FLUSH_SECONDS`` of happening, ``WRITE_DELAY`` after it at the soonest, in one transaction with the answer so
far: what happens meanwhile is written with it, so that a burst of events costs one write); text deltas are folded
into ``Run.answer``, and each step records where it falls in that text (``Step.text_offset``: the
answer's length when it happened), so that the page draws one timeline in the order things happened.
Each is published at once to the run's group (``groups.run_group``), steps with their ``seq`` and
``text_offset``, text with its ``offset`` in the answer: what a follower (``follow``) needs to place
them, and to fill a gap from the database.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.db import connection
from django.db.models import Field, Model
from django.utils import timezone

from assistant.engine.events import AgentFinished, AgentStarted, Event, TextDeltaEvent

from . import local
from .commits import lazy_atomic
from .groups import publish
from .messages import RunEvent
from .models import Run, Step
from .steps import AgentEnd, save_event


class Listener(Protocol):
    """Hears each event a recorder is given, text deltas included, as it is given, then the recorder's close
    (``telemetry.spans.RunTrace``: a run's spans)."""

    def on_event(self, event: Event) -> None: ...

    def close(self) -> None: ...


FLUSH_SECONDS = 0.1
WRITE_DELAY = 0.02  # from an event to its write: see ``Recorder._write_loop``


class Recorder:
    """Saves events as steps (text deltas folded into the answer) and publishes each one at once.

    Text deltas are published on the loop's next turn, together: a model streaming at human pace
    yields between words, so each word still goes out at once, while a burst (a fast model, a
    provider's buffered chunk) goes out as one message instead of hundreds.
    """

    def __init__(self, run_id: uuid.UUID, heard: list[Event] | None = None, listener: Listener | None = None) -> None:
        self.run_id = run_id
        self.listener = listener
        self.heard = heard
        """Where each event saved as a step is also kept, in order, for an in-process caller (``execution.Heard``)."""
        self.answer = ""
        self.seq = 0
        self._pending: list[_Row] = []
        self._dirty = False
        self._wake = asyncio.Event()
        self._closed = False
        self._pause: asyncio.Future[None] | None = None
        self._writer = asyncio.ensure_future(self._write_loop())
        self._text: list[str] = []  # deltas not published yet, from ``_text_offset`` in the answer
        self._text_offset = 0
        self._text_t = 0.0
        self._text_agent: str | None = None
        self._text_task: asyncio.Future[None] | None = None
        self._publishing = asyncio.Lock()  # messages leave in the order of the events
        self.agent_ends: list[AgentEnd] = []
        """The agents that ended, as ``steps.agent_ends`` reads them back from the saved steps."""
        self._profiles: dict[str, str] = {}

    async def emit(self, event: Event) -> None:
        if self.listener is not None:
            self.listener.on_event(event)
        if isinstance(event, TextDeltaEvent):
            if self._text and event.agent_id != self._text_agent:
                await self._publish_text()
            if not self._text:
                self._text_offset, self._text_t, self._text_agent = len(self.answer), time.monotonic(), event.agent_id
                # A task's first step runs on the loop's next turn: the deltas emitted until then go with it.
                self._text_task = asyncio.ensure_future(self._publish_text())
                # This process's listeners get the first of them at once (and skip it in the whole): a page's push
                # then starts a turn sooner. Through the channel layer they still go out together. Not while a
                # message waits to leave: the text would pass it.
                if not self._publishing.locked():
                    local.deliver(self.run_id.hex, self._text_message(event.text))
            self._text.append(event.text)
            self.answer += event.text
            self._dirty = True
            self._wake.set()
            return
        await self._publish_text()
        if isinstance(event, AgentStarted):
            self._profiles[event.agent_id] = event.profile or ""
        elif isinstance(event, AgentFinished):
            profile = self._profiles.get(event.agent_id, "")
            self.agent_ends.append(AgentEnd(self.run_id, event.model, profile, event.status, event.forced_landing))
        data = save_event(event)
        if self.heard is not None:
            self.heard.append(event)
        self.seq += 1
        offset = len(self.answer)
        self._pending.append((self.seq, event.kind, event.agent_id or "", data, offset))
        self._wake.set()
        message: RunEvent = {"type": "run.event", "run": self.run_id.hex, "seq": self.seq, "event": data,
                             "t": time.monotonic(), "text_offset": offset}  # fmt: skip
        await self._publish(message)

    async def _publish_text(self) -> None:
        if not self._text:
            return
        text, self._text = "".join(self._text), []
        message = self._text_message(text)
        async with self._publishing:
            await publish(self.run_id, message)

    def _text_message(self, text: str) -> RunEvent:
        """The text from ``_text_offset`` in the answer (``offset`` places it, for a listener that read part of it
        from the database or heard its start already), stamped with when its first delta was emitted."""
        event = save_event(TextDeltaEvent(agent_id=self._text_agent, text=text))
        return {"type": "run.event", "run": self.run_id.hex, "seq": self.seq, "event": event, "t": self._text_t,
                "offset": self._text_offset}  # fmt: skip

    async def _publish(self, message: RunEvent) -> None:
        # ``t`` (monotonic) is when the event left the engine, to measure delivery delay.
        async with self._publishing:
            await publish(self.run_id, message)

    async def _write_loop(self) -> None:
        """Write what is pending ``WRITE_DELAY`` after something is, with what came meanwhile, then nothing for the
        rest of ``FLUSH_SECONDS`` (nothing is written, and nothing wakes, while nothing happens).

        The delay lets what the engine does right after an event reach the database's thread first: an agent's
        search or its next call's budget hold, on the run's critical path, no longer waits behind the write of the
        model's answer that led to it (on PostgreSQL, 2 to 4 ms a step of each agent at 0.3 s a model call). The
        pages of this process hear every event at once (``publish``), not from the database."""
        while True:
            await self._wake.wait()
            await self._nap(WRITE_DELAY)
            self._wake.clear()
            await self.flush()
            if self._closed:
                return
            await self._nap(FLUSH_SECONDS - WRITE_DELAY)

    async def _nap(self, seconds: float) -> None:
        """Wait ``seconds``, or less if the recorder closes meanwhile."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        self._pause = loop.create_future()
        timer = loop.call_later(seconds, _resolve, self._pause)
        try:
            await self._pause
        finally:
            timer.cancel()
            self._pause = None

    async def flush(self) -> None:
        steps, self._pending = self._pending, []
        answer, dirty, self._dirty = self.answer, self._dirty, False
        if steps or dirty:
            await sync_to_async(_save, thread_sensitive=True)(self.run_id, steps, answer if dirty else None)

    async def close(self) -> None:
        if self.listener is not None:  # every event is in: the run has ended
            self.listener.close()
        await self._publish_text()
        self._closed = True
        self._wake.set()
        if self._pause is not None:
            _resolve(self._pause)
        await self._writer
        await self.flush()


_Row = tuple[int, str, str, dict[str, Any], int]
"""A step not saved yet: its ``seq``, ``kind``, ``agent_id``, ``data`` and ``text_offset``."""


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _save(run_id: uuid.UUID, steps: list[_Row], answer: str | None) -> None:
    """The steps and the answer so far, in one transaction: two plain statements (``bulk_create`` and ``update``
    spent more compiling them than the database writing). Neither sends signals, as before."""
    step_table = connection.ops.quote_name(Step._meta.db_table)
    run_table = connection.ops.quote_name(Run._meta.db_table)
    run = _db(Step, "run", run_id)
    with lazy_atomic(), connection.cursor() as cursor:
        if steps:
            now = _db(Step, "created", timezone.now())
            prep = _field(Step, "data").get_db_prep_value
            cursor.executemany(
                f"INSERT INTO {step_table} (run_id, seq, kind, agent_id, data, text_offset, created)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (run, seq, kind, agent, prep(data, connection), offset, now)
                    for seq, kind, agent, data, offset in steps
                ],
            )
        if answer is not None:
            cursor.execute(f"UPDATE {run_table} SET answer = %s WHERE id = %s", [answer, _db(Run, "id", run_id)])


def _db(model: type[Model], name: str, value: object) -> Any:
    """``value`` as the database takes it for the field ``name`` (JSON, times and UUIDs differ from one to another)."""
    return _field(model, name).get_db_prep_value(value, connection)


@functools.cache
def _field(model: type[Model], name: str) -> Field[Any, Any]:
    found = model._meta.get_field(name)
    assert isinstance(found, Field)
    return found
