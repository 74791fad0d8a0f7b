"""Turns: at most a given number of holders of one kind at once in an event loop, the others wait in order.

A process serves its runs from one event loop (the web server's, or a worker's ``Runner``), so a kind's turns in
that loop are its turns in the process. A wait for a turn is bounded by its caller's own time budgets (the agent's
and the run's deadlines cancel it) and ended by Stop, which cancels the tool call that waits: it never starts.
"""

from __future__ import annotations

import asyncio
import weakref

_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = weakref.WeakKeyDictionary()


def turn(kind: str, count: int) -> asyncio.Semaphore:
    """The turns of ``kind`` in the running loop: ``count`` at once (at least one), as the first caller says (one
    setting per kind, for the whole process)."""
    loop = asyncio.get_running_loop()
    kinds = _turns.setdefault(loop, {})
    semaphore = kinds.get(kind)
    if semaphore is None:
        semaphore = kinds[kind] = asyncio.Semaphore(max(1, count))
    return semaphore


__all__ = ["turn"]
