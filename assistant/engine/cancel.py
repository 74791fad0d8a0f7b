"""One cancellation token shared by a run and its agents.

Stop may come from this process (a view, a consumer) or another one (a worker watching a shared
flag); whoever sees it calls ``cancel`` with its cause, one of ``causes.STOP_CODES``: ``stopped_by_user``
(Stop, the API's cancel), ``category_budget`` (the category refused a reservation), ``cost_cap`` (a task's cap
crossed), ``server_shutdown`` (the worker executing the run was told to shut down)... Every model call in flight
ends at once (``RunContext.call_model``); agents check the token before each turn and before launching tools.
"""

from __future__ import annotations

import asyncio
import time

from .causes import Cause

STOPPED_BY_USER = Cause(code="stopped_by_user")


class CancelToken:
    """Set once, with its cause; every waiter wakes."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.cause: Cause | None = None
        self.cancelled_at: float | None = None
        """When it was cancelled (``time.monotonic()``): the Stop-to-end latency is measured from it."""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def stop_cause(self) -> Cause:
        """Why the run stopped (Stop, when it has not stopped yet)."""
        return self.cause or STOPPED_BY_USER

    def cancel(self, cause: Cause = STOPPED_BY_USER) -> None:
        if not cause.is_stop:
            raise ValueError(f"{cause.code!r} is not a cause a run is stopped with")
        if not self._event.is_set():
            self.cause = cause
            self.cancelled_at = time.monotonic()
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
