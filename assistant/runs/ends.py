"""A run's end, as the apps that react to it hear it: a typed event sent once per run that ends.

``execution`` (a run that ended in the process executing it) and ``leases.abandon`` (a run no process executes any
more, failed by a reaper) save the end and send ``run_ended`` with a ``RunEnded``, in the transaction that saved it;
``budgets.landings`` checks the month's forced landings, ``chat.deletion`` erases what a run of a deleted
conversation saved as it ended. Receivers take ``end`` (a keyword argument) and run inside that transaction.

Then, once the run's ``run.finished`` is published, the process that executed it awaits ``run_finished``'s receivers
(``finished``), outside any transaction: ``queue`` starts the conversation's next queued message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.dispatch import Signal

from .models import Run
from .steps import AgentEnd

log = logging.getLogger(__name__)

run_ended = Signal()
"""Sent with ``end`` (a ``RunEnded``) when a run has ended, in the transaction that saved its end."""

run_finished = Signal()
"""Sent (awaited: ``finished``) with ``conversation_id`` once a run has ended and its end is published, in the process
that executed it (the web server's loop, a Celery worker), after ``run_ended``'s transaction."""


@dataclass(frozen=True, slots=True)
class RunEnded:
    """A run that has ended, with what its end's saver knew, so that its receivers need not read it again."""

    run: Run
    """The run as saved at its end (its organisation and conversation loaded)."""
    agent_ends: tuple[AgentEnd, ...] | None
    """The agents that ended in it, as its execution saw them; None: read them from its steps."""
    conversation_deleted: bool | None
    """Whether its conversation had been deleted, as read with its row locked; None: read it."""


def announce(end: RunEnded) -> None:
    """Tell the receivers of ``run_ended`` (in the transaction that saved the end)."""
    run_ended.send(sender=RunEnded, end=end)


async def finished(conversation_id: int) -> None:
    """Await the receivers of ``run_finished`` (a run of the conversation has ended); one that fails is logged, the
    others still run."""
    for receiver, outcome in await run_finished.asend_robust(sender=RunEnded, conversation_id=conversation_id):
        if isinstance(outcome, Exception):
            log.error("a receiver of run_finished (%r) failed", receiver, exc_info=outcome)
