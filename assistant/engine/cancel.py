"""One cancellation token shared by a run and its agents.

Stop may come from this process (a view, a consumer) or another one (a worker watching a shared
flag); whoever sees it calls ``cancel``, with its cause: ``user`` (Stop, the API's cancel), ``budget`` (the
category refused a reservation), ``cost_cap`` (a task's cap crossed) or ``shutdown`` (the worker executing
the run was told to shut down). Every model call in flight ends at once (``RunContext.call_model``);
agents check the token before each turn and before launching tools.
"""

from __future__ import annotations

import asyncio
import time
from typing import Literal, TypeAlias

from .causes import Cause, CauseCode

StopCause: TypeAlias = Literal["user", "budget", "cost_cap", "shutdown"]

STOP_MESSAGES: dict[StopCause, str] = {
    "user": "stopped on request",
    "budget": "stopped: the category's monthly budget is reached",
    "cost_cap": "stopped: the task's cost cap is reached",
    "shutdown": "stopped: the server executing it was shut down",
}

STOP_CAUSES: dict[StopCause, CauseCode] = {
    "user": "stopped_by_user",
    "budget": "category_budget",
    "cost_cap": "cost_cap",
    "shutdown": "server_shutdown",
}


class CancelToken:
    """Set once; every waiter wakes."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.cause: StopCause | None = None
        self.cancelled_at: float | None = None
        """When it was cancelled (``time.monotonic()``): the Stop-to-end latency is measured from it."""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def message(self) -> str:
        return STOP_MESSAGES[self.cause or "user"]

    @property
    def stop_cause(self) -> Cause:
        """Why the run stopped, as data (``message`` is its English)."""
        return Cause(code=STOP_CAUSES[self.cause or "user"])

    def cancel(self, cause: StopCause = "user") -> None:
        if not self._event.is_set():
            self.cause = cause
            self.cancelled_at = time.monotonic()
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
