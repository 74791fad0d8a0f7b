"""What the database is sent, from every thread: Django's query log (``django.db.backends``, on with ``DEBUG``).

``django_assert_num_queries`` sees one connection, the test's thread's; a request served through ASGI, a run and a
live page send theirs from threads of their own. ``every_query`` sees them all; ``held_queries`` makes the database
slow to answer some of them (each waits, once executed, until the test releases it), to try what happens meanwhile.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.test.utils import override_settings

HOLD_SECONDS = 60.0
"""The longest a held statement waits for its release (a guard against hanging: a test releases it long before)."""


class _Log(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.sql: list[str] = []
        self.holds: list[Hold] = []

    def emit(self, record: logging.LogRecord) -> None:
        sql = getattr(record, "sql", None)
        if not isinstance(sql, str):
            return
        self.sql.append(sql)
        for hold in self.holds:
            hold.meet(sql)


@contextmanager
def _logged() -> Iterator[_Log]:
    logger = logging.getLogger("django.db.backends")
    handler = _Log()
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # every statement, kept here, not in the test's captured log too
    try:
        with override_settings(DEBUG=True), warnings.catch_warnings():
            # With DEBUG on, Django warns of every ``{% csrf_token %}`` rendered without a request (the fragments a
            # live page is pushed), which the tests' settings make an error: not what a test of queries is about.
            warnings.filterwarnings("ignore", r"A \{% csrf_token %\} was used in a template", UserWarning)
            yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


@contextmanager
def every_query() -> Iterator[list[str]]:
    """The SQL of every statement sent to the database while open, by any thread, in the order they ran."""
    with _logged() as log:
        yield log.sql


class Hold:
    """Statements that ``matching`` picks wait, once executed, until ``release`` (those of the thread that opened the
    hold excepted: an async test's own thread runs the event loop)."""

    def __init__(self, matching: Callable[[str], bool]) -> None:
        self.matching = matching
        self.reached = threading.Event()
        """Set when a statement it holds has run (the database is answering it)."""
        self.released = threading.Event()
        self.owner = threading.get_ident()

    def meet(self, sql: str) -> None:
        if threading.get_ident() == self.owner or self.released.is_set() or not self.matching(sql):
            return
        self.reached.set()
        self.released.wait(HOLD_SECONDS)

    def release(self) -> None:
        self.released.set()


@contextmanager
def held_queries(matching: Callable[[str], bool]) -> Iterator[Hold]:
    """While open, the statements ``matching`` picks wait for ``Hold.release`` (released at the latest on exit)."""
    with _logged() as log:
        hold = Hold(matching)
        log.holds.append(hold)
        try:
            yield hold
        finally:
            hold.release()
