"""Following a run: its steps and its answer in order, nothing missed and nothing twice, wherever it executes.

A run publishes every event to its group ``run_<hex>`` (``recorder.Recorder``): steps numbered by
``seq``, text deltas placed by their ``offset`` in the answer. A follower joins the group *first*,
then reads the run from the database, then applies what the group delivers (``Follower.apply``): a
step it already has or a piece of text it already has is skipped, and a gap (a message the layer
dropped, or the database being a little behind the stream) is filled from the database
(``Follower.catch_up``). So a follower that joins mid-run misses nothing and gets nothing twice.

The live page (``chat.live.LiveRun``, whose websocket consumer receives the group's messages) and
the API (``RunFollower``, listening on a channel of its own) both follow a run through ``Follower``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import cast

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from assistant.engine.events import TextDeltaEvent

from . import local
from .groups import end_group, run_group
from .messages import RunEvent, RunFinished, RunMessage
from .models import Run, Step
from .steps import load_event, published_text

Item = Step | str
"""What following a run yields: a step, or the next piece of its answer."""

CATCH_UP_TRIES = 40
CATCH_UP_PAUSE = 0.05  # the recorder writes to the database at least every 0.1 s
QUIET_SECONDS = 1.0  # with nothing received for this long, the database says whether the run has ended


def steps_since(run_id: uuid.UUID, seq: int) -> tuple[list[Step], str]:
    """The run's saved steps after ``seq``, and its answer as saved so far."""
    steps = list(Step.objects.filter(run_id=run_id, seq__gt=seq).order_by("seq"))
    answer = Run.objects.filter(pk=run_id).values_list("answer", flat=True).first() or ""
    return steps, answer


class Follower:
    """How far a follower is in one run: its steps up to ``seq``, its answer up to ``len(answer)``."""

    def __init__(self, run_id: uuid.UUID, seq: int = 0, answer: str = "") -> None:
        self.run_id = run_id
        self.seq = seq
        self.answer = answer

    def apply(self, message: RunEvent) -> list[Item] | None:
        """What one published event (a ``run.event`` message) adds: nothing when this follower has it already,
        None when something before it is missing (then ``catch_up``)."""
        seq = message["seq"]
        delta = published_text(message["event"])
        event = load_event(message["event"]) if delta is None else None
        if isinstance(event, TextDeltaEvent):  # of another version
            delta = event.text
        if delta is not None:
            offset = message.get("offset", len(self.answer))
            if seq > self.seq or offset > len(self.answer):
                return None
            text = delta[len(self.answer) - offset :]
            self.answer += text
            return [text] if text else []
        if seq <= self.seq:
            return []
        if seq > self.seq + 1:
            return None
        self.seq = seq
        return [Step.published(self.run_id, seq, message["event"], message.get("text_offset"), event)]

    def merge(self, steps: list[Step], answer: str) -> list[Item]:
        """What the database has (``steps_since``) beyond what this follower has."""
        items: list[Item] = []
        for step in steps:
            if step.seq != self.seq + 1:
                break
            self.seq = step.seq
            items.append(step)
        if len(answer) > len(self.answer) and answer.startswith(self.answer):
            text, self.answer = answer[len(self.answer) :], answer
            items.append(text)
        return items

    def has_all(self, finished: RunFinished | None) -> bool:
        """Whether this follower has every step and all the text of a run whose end ``finished`` announced, as that
        message says (a run's recorder announces its last ``seq`` and its answer's length; others do not)."""
        return (
            finished is not None
            and finished.get("seq") == self.seq
            and finished.get("answer_length") == len(self.answer)
        )

    async def catch_up(self, message: RunEvent | None = None) -> list[Item]:
        """Read the database until what precedes ``message`` is there, then apply it; without a message, once."""
        items: list[Item] = []
        for _ in range(CATCH_UP_TRIES if message is not None else 1):
            steps, answer = await database_sync_to_async(steps_since)(self.run_id, self.seq)
            items += self.merge(steps, answer)
            if message is None:
                break
            applied = self.apply(message)
            if applied is not None:
                return items + applied
            await asyncio.sleep(CATCH_UP_PAUSE)
        return items  # given up on ``message``: what the run saves is read once it ends anyway


class RunFollower(Follower):
    """Follows one run from its start on a channel of its own: open it before the run starts, close it once done."""

    def __init__(self, run_id: uuid.UUID) -> None:
        super().__init__(run_id)
        self._layer = get_channel_layer()
        self._channel = ""
        self._group = run_group(run_id)
        self._events = True
        self._heard: asyncio.Queue[RunMessage] | None = None  # what it hears in this process (``local``)

    async def open(self, events: bool = True) -> RunFollower:
        """Listen to the run; without ``events``, only to its end (``finished``): what the run publishes meanwhile is
        then not even delivered to this follower. Where every run executes in this process (``local.in_process``),
        its messages are handed over in the publisher's call; elsewhere they come through the channel layer."""
        self._events = events
        if local.in_process():
            self._heard = asyncio.Queue()
            local.listen(self.run_id.hex, self._hear)
        elif self._layer is not None:
            self._group = run_group(self.run_id) if events else end_group(self.run_id)
            self._channel = await self._layer.new_channel()
            await self._layer.group_add(self._group, self._channel)
        return self

    def _hear(self, message: RunMessage) -> None:
        if self._heard is not None and (self._events or message["type"] == "run.finished"):
            self._heard.put_nowait(message)

    async def close(self) -> None:
        if self._heard is not None:
            local.unlisten(self.run_id.hex, self._hear)
            self._heard = None
        if self._layer is not None and self._channel:
            await self._layer.group_discard(self._group, self._channel)
            self._channel = ""

    async def items(self) -> AsyncIterator[Item]:
        """Each step and each new piece of the answer, in order, until the run ends (with everything it saved)."""
        while True:
            message = await self._next()
            if message is None or message["type"] == "run.finished":
                if not self.has_all(message):
                    for item in await self.catch_up():
                        yield item
                if message is not None or not await self._running():
                    return
                continue
            applied = self.apply(message)
            for item in applied if applied is not None else await self.catch_up(message):
                yield item

    async def finished(self) -> None:
        """Wait for the run's end, without reading what it publishes meanwhile (the API's response not streamed
        reads the finished run from the database): its ``run.finished`` message, or the database saying it ended."""
        while True:
            message = await self._next()
            if message is not None and message["type"] == "run.finished":
                return
            if message is None and not await self._running():
                return

    async def _next(self) -> RunMessage | None:
        if self._heard is not None:
            if not self._heard.empty():
                return self._heard.get_nowait()
            try:
                async with asyncio.timeout(QUIET_SECONDS):
                    return await self._heard.get()
            except TimeoutError:
                return None
        if self._layer is None:
            await asyncio.sleep(QUIET_SECONDS)
            return None
        try:
            async with asyncio.timeout(QUIET_SECONDS):  # no task of its own, as ``wait_for`` makes, per message
                # The run's group carries its messages only: what the layer returns is one of them.
                message = cast(RunMessage, await self._layer.receive(self._channel))
        except TimeoutError:
            return None
        return message

    async def _running(self) -> bool:
        return await Run.objects.filter(pk=self.run_id, status=Run.Status.RUNNING).aexists()
