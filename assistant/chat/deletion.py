"""Deleting a conversation: its text is erased, its accounting is kept.

Runs carry what the organisation spent (tokens, cost, carbon, charged to a budget category), and the
usage page, its CSV and the API's ``GET /v1/runs/{id}`` read them, with their ``agent_started`` and
``agent_finished`` steps (agents per run, per model and profile, their rounds, status and usage). So a
deleted conversation is a tombstone: ``Conversation.deleted`` is set and its title emptied, its messages
are deleted, and each run keeps every number (status, model, level, category, rounds, usage, cost, its
steps' numbers) while every text the user wrote or the assistant produced from it is erased: the answer,
the sources, an API run's kept messages and client tools, and in each step every field its event type marks ``Erase`` (``engine.events.erased``: the
agents' instructions, reports and actions, the tool calls' arguments and results, ...). Steps keep their
shape (the same event, text emptied), so every reader of runs works unchanged; a step no event can be read
from is emptied whole.

Deleted conversations exist for no page, no websocket and no sidebar. A run still running is stopped
first (``runs.execution.request_stop``, as Stop does); whatever it writes as it ends (its answer, the assistant's
message, steps saved late) is erased by the receivers at the bottom as soon as it is saved.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone

from assistant.engine.events import erased
from assistant.runs import execution, groups
from assistant.runs.ends import RunEnded, run_ended
from assistant.runs.models import Conversation, Message, Run, Step
from assistant.runs.steps import UnreadableStep, resave

from . import search

log = logging.getLogger(__name__)

# How long a delete waits for a run executing in this process to end once stopped (it usually takes
# well under a second: the stream ends at once, agents return before their next turn).
STOP_WAIT_SECONDS = 5.0


def erase_step(step: Step) -> bool:
    """Empty the text of a step's event (its ``Erase`` fields), its shape kept; False when it had none.

    A step no event can be read from is emptied whole."""
    try:
        event = step.event
    except UnreadableStep:
        return resave(step, None)
    return resave(step, erased(event))


def erase_run(run_id: Any) -> None:
    """Empty one run's text (answer, sources, steps' text) and delete its messages; numbers stay."""
    with transaction.atomic():
        # An API run's kept messages and its client's tools are text of the conversation too.
        Run.objects.filter(pk=run_id).update(answer="", sources=[], prompt=[], client_tools={})
        Message.objects.filter(run_id=run_id).delete()
        changed = [step for step in Step.objects.filter(run_id=run_id) if erase_step(step)]
        Step.objects.bulk_update(changed, ["data"], batch_size=500)


def erase(conversation_id: int) -> None:
    """Mark the conversation deleted and erase its text; its runs' accounting is untouched."""
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(deleted=timezone.now(), title="")
        Message.objects.filter(conversation_id=conversation_id).delete()  # every version of every turn, queued too
        search.unindex(conversation_id)  # its text leaves the conversation search
        for run_id in Run.objects.filter(conversation_id=conversation_id).values_list("pk", flat=True):
            erase_run(run_id)


async def delete_conversation(conversation: Conversation) -> None:
    """Stop its running runs as Stop does, erase it, and close the pages open on it."""
    running = [
        pk
        async for pk in Run.objects.filter(conversation=conversation, status=Run.Status.RUNNING).values_list(
            "pk", flat=True
        )
    ]
    for run_id in running:
        await execution.request_stop(run_id)
    for run_id in running:
        # A run executing in this process ends within moments; one executing elsewhere is erased as it ends.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(execution.wait_for(run_id), STOP_WAIT_SECONDS)
    await sync_to_async(erase)(conversation.pk)
    await groups.announce_deleted(conversation.pk)


def _is_deleted(conversation_id: int) -> bool:
    return Conversation.objects.filter(pk=conversation_id, deleted__isnull=False).exists()


@receiver(run_ended, dispatch_uid="chat.deletion.run_ended")
def _run_ended(sender: type[RunEnded], end: RunEnded, **kwargs: Any) -> None:
    # A run stopped by a delete saves its answer and sources as it ends (or a reaper fails it): erase them, and the
    # assistant's message saved with them.
    deleted = end.conversation_deleted
    if deleted is None:
        deleted = _is_deleted(end.run.conversation_id)
    if deleted:
        log.info("erasing run %s of a deleted conversation as it ends", end.run.pk)
        erase_run(end.run.pk)


@receiver(post_save, sender=Message, dispatch_uid="chat.deletion.message_saved")
def _message_saved(sender: type[Message], instance: Message, created: bool, **kwargs: Any) -> None:
    # A message saved in a conversation deleted meanwhile. The answer saved with its run's end is its end's to erase
    # (``_run_ended``).
    if not created or (instance.role == "assistant" and instance.run_id is not None):
        return
    if _is_deleted(instance.conversation_id):
        Message.objects.filter(pk=instance.pk).delete()
