"""One cancellation token shared by a run and its agents, and Stop as an exception (``RunStopped``).

Stop may come from this process (a view, a consumer) or another one (a worker watching a shared
flag); whoever sees it calls ``cancel`` with its cause, one of ``causes.STOP_CODES``: ``stopped_by_user``
(Stop, the API's cancel), ``category_budget`` (the category refused a reservation), ``cost_cap`` (a task's cap
crossed), ``server_shutdown`` (the worker executing the run was told to shut down)... Every model call in flight
ends at once (``RunContext.call_model`` raises ``RunStopped``); a round's tool calls are cancelled (``run_round``);
agents and the main loop check the token before each round (``check``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from .causes import Cause
from .errors import EngineError
from .usage import RunUsage

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

    def check(self, usage: RunUsage | None = None) -> None:
        """Raise ``RunStopped`` once the run is stopped (``usage``: what the one checking has used so far)."""
        if self._event.is_set():
            raise RunStopped(self.stop_cause, usage)

    def cancel(self, cause: Cause = STOPPED_BY_USER) -> None:
        if not cause.is_stop:
            raise ValueError(f"{cause.code!r} is not a cause a run is stopped with")
        if not self._event.is_set():
            self.cause = cause
            self.cancelled_at = time.monotonic()
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()


class RunStopped(EngineError):
    """Stop, as an exception: the run (or the agent) stopped with ``cause``, one of ``causes.STOP_CODES``.

    Raised by ``RunContext.call_model`` for a call Stop aborted (``text``: what it had streamed before, billed as
    cut) or kept from starting, by ``CancelToken.check`` between rounds, and by ``run_round`` for a round whose tool
    calls Stop cancelled. ``usage`` is what was used so far by whoever made the call (an agent's own, or the run's).
    The main loop ends the run ``stopped`` with it, an agent ends ``stopped`` with what it had found.
    """

    def __init__(self, cause: Cause, usage: RunUsage | None = None, text: str = "") -> None:
        super().__init__(cause.english())
        self.cause = cause
        self.usage = usage
        self.text = text


T = TypeVar("T")


async def run_round(
    token: CancelToken, calls: Sequence[Coroutine[Any, Any, T]], *, spared: Sequence[bool] = ()
) -> list[T]:
    """Run a round's tool calls concurrently, each in its own task of one ``asyncio.TaskGroup``; their results in order.

    Stop cancels each call's task (its ``CancelledError`` reaches the tool where it waits: a query, a sandbox, a
    connector's call) and, once every task has ended, raises ``RunStopped``; a call whose ``spared`` is true is not
    cancelled but awaited (the agents tool: its agents stop on their own and report what they had). A call that
    raises cancels the others (the ``TaskGroup``'s rule), and its exception is raised (the first, if several are).
    """
    tasks: list[asyncio.Task[T]] = []
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
            pending = {t for i, t in enumerate(tasks) if not (i < len(spared) and spared[i])}
            if pending:
                waiter = asyncio.ensure_future(token.wait())
                try:
                    while pending and not token.cancelled:
                        await asyncio.wait([*pending, waiter], return_when=asyncio.FIRST_COMPLETED)
                        pending = {t for t in pending if not t.done()}
                finally:
                    waiter.cancel()
                for task in pending:
                    task.cancel()
    except BaseExceptionGroup as e:
        raise e.exceptions[0]  # noqa: B904  (the group's other exceptions are the cancelled siblings')
    if any(t.cancelled() for t in tasks):
        raise RunStopped(token.stop_cause)
    return [t.result() for t in tasks]
