"""Following one run from its start through its channel-layer group, wherever it executes.

The same protocol as the live chat (``chat.live``): join the group *before* the run starts, then
take the steps in ``seq`` order and the answer's text by its ``offset``; a gap (a message the
layer dropped) is filled from the database. ``RunFollower.items()`` yields each new step and each
new piece of the answer, and ends once the run has ended, with everything it saved.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from assistant.chat.live import steps_since
from assistant.chat.models import Run, Step
from assistant.chat.runs import group_name
from assistant.chat.steps import load_event
from assistant.engine.events import TextDeltaEvent

QUIET_SECONDS = 1.0  # with nothing received for this long, the database says whether the run has ended


class RunFollower:
    def __init__(self, run_id: uuid.UUID) -> None:
        self.run_id = run_id
        self.seq = 0
        self.answer = ""
        self._layer = get_channel_layer()
        self._channel = ""

    async def open(self) -> RunFollower:
        """Join the run's group; open it before the run starts, close it once done."""
        if self._layer is not None:
            self._channel = await self._layer.new_channel()
            await self._layer.group_add(group_name(self.run_id), self._channel)
        return self

    async def close(self) -> None:
        if self._layer is not None and self._channel:
            await self._layer.group_discard(group_name(self.run_id), self._channel)
            self._channel = ""

    async def items(self) -> AsyncIterator[Step | str]:
        """Each step (a ``Step``) and each new piece of the answer (a ``str``), in order, until the run ends."""
        while True:
            message = await self._next()
            if message is None or message.get("type") == "run.finished":
                async for item in self._catch_up():
                    yield item
                if message is not None or not await self._running():
                    return
                continue
            if message.get("type") != "run.event":
                continue
            for item in await self._apply(message):
                yield item

    async def _next(self) -> dict[str, Any] | None:
        if self._layer is None:
            await asyncio.sleep(QUIET_SECONDS)
            return None
        try:
            message: dict[str, Any] = await asyncio.wait_for(self._layer.receive(self._channel), QUIET_SECONDS)
        except TimeoutError:
            return None
        return message

    async def _apply(self, message: dict[str, Any], catch_up: bool = True) -> list[Step | str]:
        seq: int = message["seq"]
        event = load_event(message["event"])
        if isinstance(event, TextDeltaEvent):
            offset: int = message.get("offset", len(self.answer))
            behind = seq > self.seq or offset > len(self.answer)
        else:
            if seq <= self.seq:
                return []
            behind = seq > self.seq + 1
        if behind:
            # Something before this message is missing: read it, then apply the message if it still fits.
            if not catch_up:
                return []
            return [item async for item in self._catch_up()] + await self._apply(message, catch_up=False)
        if isinstance(event, TextDeltaEvent):
            text: str = event.text[len(self.answer) - offset :]
            self.answer += text
            return [text] if text else []
        self.seq = seq
        return [Step.published(self.run_id, seq, message["event"])]

    async def _catch_up(self) -> AsyncIterator[Step | str]:
        steps, answer = await database_sync_to_async(steps_since)(self.run_id, self.seq)
        for step in steps:
            if step.seq != self.seq + 1:
                break
            self.seq = step.seq
            yield step
        if len(answer) > len(self.answer) and answer.startswith(self.answer):
            text, self.answer = answer[len(self.answer) :], answer
            yield text

    async def _running(self) -> bool:
        return await Run.objects.filter(pk=self.run_id, status="running").aexists()
