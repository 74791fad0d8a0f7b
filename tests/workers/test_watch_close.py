"""A run's watch ends even when the channel layer's ``receive`` drops a cancellation.

The hang the workers benchmark saw (a Celery worker that never exited after SIGTERM): a run ended, its watch
cancelled its listener, but the Redis client sends each command through Python 3.11's ``asyncio.wait_for``, which
drops a cancellation that comes as the command was sent (CPython gh-86296); the layer's ``receive`` then waited for
a message that never came, the run's ``Watch.close`` with it, so the run's task never ended, its lease was no longer
renewed (the reaper failed the run), and the worker's warm shutdown waited for that task forever.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from channels.layers import get_channel_layer

from assistant.engine.cancel import CancelToken
from assistant.runs import groups, leases

pytestmark = pytest.mark.django_db(transaction=True)


class DroppingLayer:
    """A channel layer whose ``receive`` drops the first cancellation it gets, then waits for a message that never
    comes, as ``channels_redis``'s does when the cancellation lands in ``wait_for`` as a command was sent."""

    def __init__(self) -> None:
        self.cancellations = 0
        self.receiving = asyncio.Event()
        self.discarded: list[tuple[str, str]] = []

    async def new_channel(self) -> str:
        return "specific.test!watch"

    async def group_add(self, group: str, channel: str) -> None:
        return None

    async def group_discard(self, group: str, channel: str) -> None:
        self.discarded.append((group, channel))

    async def receive(self, channel: str) -> dict[str, str]:
        self.receiving.set()
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancellations += 1
                if self.cancellations > 1:
                    raise


async def test_a_watch_whose_listener_drops_a_cancellation_still_closes(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.DroppingLayer"}}  # the layer the watch gets
    layer = get_channel_layer()
    assert isinstance(layer, DroppingLayer)
    run_id = uuid.uuid4()
    watch = leases.Watch(run_id, CancelToken())
    await watch.start(flag_read=True)
    await layer.receiving.wait()
    closing = asyncio.ensure_future(watch.close())
    # A guard against hanging, not a measure: without cancelling again, close never ends.
    await asyncio.wait([closing], timeout=60)
    try:
        assert closing.done(), "the watch's listener was cancelled once and never ended"
        await closing
        assert layer.cancellations == 2
        assert all(task.done() for task in watch._tasks)
        assert layer.discarded == [(groups.stop_group(run_id), "specific.test!watch")]
    finally:
        for task in [closing, *watch._tasks]:
            task.cancel()
        await asyncio.gather(closing, *watch._tasks, return_exceptions=True)
