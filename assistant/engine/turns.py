"""Turns: at most a given number of holders of one kind at once in an event loop, the others wait in order.

A process serves its runs from one event loop (the web server's, or a worker's ``Runner``), so a kind's turns in
that loop are its turns in the process. A wait for a turn is bounded by its caller's own time budgets (the agent's
and the run's deadlines cancel it) and ended by Stop, which cancels the tool call that waits: it never starts.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass

_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class Turn:
    """A kind of turn (``data_query``, ``run_code``) and how many at once (a setting, the same for the process)."""

    kind: str
    count: int


def turn(of: Turn) -> asyncio.Semaphore:
    """The turns of ``of.kind`` in the running loop: ``of.count`` at once (at least one), as the first caller says."""
    loop = asyncio.get_running_loop()
    kinds = _turns.setdefault(loop, {})
    semaphore = kinds.get(of.kind)
    if semaphore is None:
        semaphore = kinds[of.kind] = asyncio.Semaphore(max(1, of.count))
    return semaphore


__all__ = ["Turn", "turn"]
