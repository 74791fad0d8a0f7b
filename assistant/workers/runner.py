"""A worker process's event loop: every run the process executes runs in it, and so does the reaper.

Celery gives each task a thread (``worker_pool="threads"``, ``RUNS_WORKER_CONCURRENCY`` of them); the
task hands its run to this loop and waits for it, so a worker executes as many runs at once as it
has threads, all in one loop, as the web server does in the embedded default. When the worker is told to
shut down (SIGTERM: Celery's warm shutdown, which waits for its tasks), ``stop_runs`` stops its runs as Stop
does, so that they end at once with what they had and the worker exits without waiting for their model calls.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from django.conf import settings

from assistant.engine.causes import Cause
from assistant.runs import execution, leases

log = logging.getLogger(__name__)
T = TypeVar("T")


class Runner:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=self._serve, args=(loop,), name="runs", daemon=True).start()
                asyncio.run_coroutine_threadsafe(self._reap_forever(), loop)
                self._loop = loop
            return self._loop

    def stop_runs(self) -> None:
        """Stop the runs executing in the loop, as Stop does (cause ``shutdown``); from any thread."""
        with self._lock:
            loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._stop_runs)

    @staticmethod
    def _stop_runs() -> None:
        stopped = execution.stop_all(Cause(code="server_shutdown"))
        if stopped:
            log.warning("the worker is shutting down: %d run(s) stopped", stopped)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` in the loop and wait for its result (from a task's thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.start()).result()

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    @staticmethod
    async def _reap_forever() -> None:
        while True:
            try:
                await leases.areap()
            except Exception:
                log.exception("could not reap the runs of dead workers")
            await asyncio.sleep(settings.RUNS_HEARTBEAT_SECONDS)


runner = Runner()
