"""Transactions of a run's course whose commit need not wait for the disk.

A run commits at every model call: its budget hold (``budgets.reservations``: reserved before the call, settled
after it) and its recorder's steps (``recorder``). On PostgreSQL each commit waits for the write-ahead log to
reach the disk (``synchronous_commit = on``, a few milliseconds), a dozen times along a run's critical path.
``lazy_atomic`` is ``transaction.atomic`` with ``SET LOCAL synchronous_commit TO OFF``: the commit returns once
the log is written, and PostgreSQL's WAL writer flushes it within a fraction of a second. Nothing else changes:
the transaction is as atomic, isolated and consistent as before, other sessions see it at once, and a crash of
the application loses nothing. Only a crash of the database server itself in that fraction of a second can lose
these last commits, and then only together with everything the run did after them: the run's end is committed
normally (``execution.end_run``), and that commit waits for the log up to itself, so a finished run's steps and
charges are all on disk. What such a crash can lose is a hold (the reaper frees holds anyway) and the steps and
charges of a run that had not ended, which the crash interrupts too: a call served and not charged, never one
charged and not served. Inside another transaction it is a plain ``atomic``: that one commits as it would. SQLite (WAL, ``synchronous=NORMAL``, settings) has no such wait to remove.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from django.db import connection, transaction


@contextmanager
def lazy_atomic() -> Iterator[None]:
    """``transaction.atomic()`` whose commit does not wait for the disk on PostgreSQL (see the module). Inside another
    transaction (intake's, whose run and messages must be on disk when it commits) it is part of that transaction, with
    no savepoint of its own: an error in it fails the whole transaction."""
    outermost = not connection.in_atomic_block
    # Inside another transaction no savepoint either (two statements saved): an error in it fails that transaction.
    with transaction.atomic(savepoint=outermost):
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield


def lazy_statement() -> AbstractContextManager[None]:
    """For one statement that is its own transaction: on PostgreSQL ``lazy_atomic`` (a transaction is needed to set
    it), elsewhere nothing (the statement commits on its own, as it would)."""
    return lazy_atomic() if connection.vendor == "postgresql" and not connection.in_atomic_block else nullcontext()
