"""The one way a test waits for something: ``until`` (in an event loop) and ``wait_until`` (in a thread).

A wait is a guard against hanging, never a measure: its limit is generous (the machine may be loaded), and when it
is reached the test fails saying what it waited for and what the condition last returned.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable

PAUSE = 0.02
"""Seconds between two looks at the condition."""


def _failure(what: str | Callable[[], str], seconds: float, value: object) -> str:
    said = what if isinstance(what, str) else what()
    return f"waited {seconds:g} s for {said}; the condition last gave {value!r}"


async def until(condition: Callable[[], object], what: str | Callable[[], str], seconds: float = 60.0) -> None:
    """Wait until ``condition()`` (a function, or a coroutine function such as a read of the database) is truthy;
    after ``seconds``, fail naming ``what`` (or what ``what()`` says then: a log's end, say)."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(_failure(what, seconds, value))
        await asyncio.sleep(PAUSE)


def wait_until(condition: Callable[[], object], what: str | Callable[[], str], seconds: float = 60.0) -> None:
    """``until`` for a test that runs no event loop."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(_failure(what, seconds, value))
        time.sleep(PAUSE)
