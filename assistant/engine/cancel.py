"""One cancellation token shared by a run and its agents, and Stop as an exception (``RunStopped``).

Stop may come from this process (a view, a consumer) or another one (a worker watching a shared
flag); whoever sees it calls ``cancel`` with its cause, one of ``causes.STOP_CODES``: ``stopped_by_user``
(Stop, the API's cancel), ``category_budget`` (the category refused a reservation), ``cost_cap`` (a task's cap
crossed), ``server_shutdown`` (the worker executing the run was told to shut down)... Every model call in flight
ends at once (``RunContext.call_model`` raises ``RunStopped``); a round's tool calls are stopped (``run_round``,
``tools.run_tool_call``); agents and the main loop check the token before each round (``check``).

Each agent has a token of its own (``agent``): cancelled with its run's, or alone (``stop_agent``, with the cause
``stopped_by_user`` naming the agent: the user stopped that agent while its run goes on). An agent's calls and tools
wait on its own token, so a stop reaches them at once either way.
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
        self._cancelled = False
        self._waiters: set[asyncio.Future[None]] = set()
        self.cause: Cause | None = None
        self.cancelled_at: float | None = None
        """When it was cancelled (``time.monotonic()``): the Stop-to-end latency is measured from it."""
        self._agents: dict[str, CancelToken] = {}

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def stop_cause(self) -> Cause:
        """Why the run stopped (Stop, when it has not stopped yet)."""
        return self.cause or STOPPED_BY_USER

    def check(self, usage: RunUsage | None = None) -> None:
        """Raise ``RunStopped`` once the run is stopped (``usage``: what the one checking has used so far)."""
        if self._cancelled:
            raise RunStopped(self.stop_cause, usage)

    def cancel(self, cause: Cause = STOPPED_BY_USER) -> None:
        """Stop the run (or the agent) with ``cause``: every agent's token too (``agent``)."""
        if not cause.is_stop:
            raise ValueError(f"{cause.code!r} is not a cause a run is stopped with")
        if not self._cancelled:
            self.cause = cause
            self.cancelled_at = time.monotonic()
            self._cancelled = True
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)
            for token in self._agents.values():
                token.cancel(cause)

    def agent(self, agent_id: str) -> CancelToken:
        """The token of one agent of this run (until ``release``): cancelled with the run, or alone by
        ``stop_agent``."""
        token = CancelToken()
        if self.cause is not None:
            token.cancel(self.cause)
        self._agents[agent_id] = token
        return token

    def release(self, agent_id: str) -> None:
        """The agent has ended: a stop for it finds nothing to stop."""
        self._agents.pop(agent_id, None)

    def stop_agent(self, agent_id: str, cause: Cause | None = None) -> bool:
        """Stop one working agent of this run, alone (``cause``: the user's Stop naming it, by default), while the
        run goes on; False when no such agent is working."""
        token = self._agents.get(agent_id)
        if token is None or token.cancelled:
            return False
        token.cancel(cause or Cause(code="stopped_by_user", agent_id=agent_id))
        return True

    async def race(self, work: asyncio.Future[Any], timeout: float | None = None) -> None:
        """Wait until ``work`` is done, the token cancelled or ``timeout`` seconds passed, whichever comes first.

        Without a task of its own (one future woken by whichever comes first): a round's every tool call and model
        call races Stop, so this is on the path of every round. ``work`` is left as it is: its caller cancels it.
        """
        if work.done() or self._cancelled:
            return
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def wake(_: object = None) -> None:
            if not woken.done():
                woken.set_result(None)

        work.add_done_callback(wake)
        self._waiters.add(woken)
        timer = None if timeout is None else loop.call_later(timeout, wake)
        try:
            await woken
        finally:
            work.remove_done_callback(wake)
            self._waiters.discard(woken)
            if timer is not None:
                timer.cancel()


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


async def run_round(calls: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Run a round's tool calls concurrently, each in its own task of one ``asyncio.TaskGroup`` (a lone call in the
    round's own task); their results in order.

    Stop reaches each call through its own task (``tools.run_tool_call`` races it against the token: the tool's work is
    cancelled where it waits, and the call returns stopped); a call that raises cancels the others (the
    ``TaskGroup``'s rule), and its exception is raised (the first, if several are).
    """
    if len(calls) == 1:  # no sibling to run beside or to cancel: the call runs in the round's own task
        return [await calls[0]]
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as e:
        raise e.exceptions[0]  # noqa: B904  (the group's other exceptions are the cancelled siblings')
    return [t.result() for t in tasks]
