"""The queue of a conversation: one run at a time, the messages written meanwhile sent in order as each run ends.

A message written while its conversation has a running run is kept as a queued ``Message`` (``intake.submit``); the
database allows one running run per conversation (a partial unique constraint), so two tabs or two processes
posting at once cannot start two. When a run ends, wherever it executed (the web server's loop, a Celery worker),
``start_queued`` hears it (``ends.run_finished``, connected by the app's ``ready``): the oldest queued message gets its
run, which is announced and launched as a new one would be.
"""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async

from assistant.engine.errors import RequestRefused

from . import execution, groups, intake
from .models import Conversation, Message, Run
from .start import RunStart

log = logging.getLogger(__name__)


def next_queued(conversation_id: int) -> RunStart | None:
    """Send the conversation's oldest queued message, if no run is going on: its run's start, or None. A message that can
    no longer be sent (its model withdrawn, its budget spent) keeps the reason, and the next one is tried."""
    waiting = Message.objects.filter(conversation_id=conversation_id, queued=True, queue_error="").order_by("pk")
    if not waiting.exists():
        return None  # most runs end so: one query
    conversation = (
        Conversation.objects.filter(pk=conversation_id, deleted__isnull=True)
        .select_related("user", "organisation")
        .first()
    )
    if conversation is None:
        return None
    while True:
        if Run.objects.filter(conversation_id=conversation_id, status=Run.Status.RUNNING).exists():
            return None
        message = waiting.first()  # read after the check: one another process sent meanwhile is not sent twice
        if message is None:
            return None
        try:
            return intake.create_run(
                conversation.user, conversation.organisation, conversation, intake.ask_of(message), queued=message
            )
        except intake.Busy:
            return None  # another process started one meanwhile: its end sends this message
        except RequestRefused as e:
            Message.objects.filter(pk=message.pk).update(queue_error=str(e) or "refused")


async def start_queued(conversation_id: int) -> None:
    """After a run ends (or when its page opens): start the conversation's next queued message, if any. Never
    raises: a failure is logged, the message stays queued."""
    try:
        start = await sync_to_async(next_queued)(conversation_id)
        if start is None:
            return
        await groups.announce_started(start.run)
        execution.launch(start)
    except Exception:
        log.exception("could not send the queued message of conversation %s", conversation_id)


async def on_run_finished(conversation_id: int, **kwargs: object) -> None:
    """``ends.run_finished``'s receiver: a run of the conversation has ended."""
    await start_queued(conversation_id)
