"""The channel-layer groups a run's life goes through, and the messages announcing its start and its end.

- ``run_<hex>`` (``run_group``): every event of one run as the recorder publishes it (``run.event``),
  then ``run.finished`` (``publish``, which hands them first to the listeners in this process: ``local``); the
  live page and the API follow it (``follow``).
- ``end_<hex>`` (``end_group``): ``run.finished`` only, for a follower that waits for the run's end without
  reading its events (the API's response not streamed).
- ``stop_<hex>`` (``stop_group``): Stop, from whichever process received it, to the process executing
  the run (``leases.Watch``).
- ``conversation_<id>`` (``conversation_group``): a run started in the conversation
  (``conversation.run``), the conversation deleted (``conversation.deleted``); its open pages listen.

With no channel layer configured, nothing is sent (and nothing listens).
"""

from __future__ import annotations

import uuid

from channels.layers import get_channel_layer

from assistant.engine.events import RunStatus

from . import local
from .messages import ConversationDeleted, ConversationRun, RunFinished, RunMessage, group_send
from .models import Run


async def publish(run_id: uuid.UUID, message: RunMessage) -> None:
    """One of a run's messages (``run.event``, ``run.finished``) to whoever follows it: the listeners in this
    process at once (``local``), then, unless every listener is in this process, the run's group through the channel
    layer."""
    local.deliver(run_id.hex, message)
    layer = get_channel_layer()
    if layer is not None and not local.in_process():
        await group_send(layer, run_group(run_id), message)


def run_group(run_id: uuid.UUID) -> str:
    return f"run_{run_id.hex}"


def end_group(run_id: uuid.UUID) -> str:
    return f"end_{run_id.hex}"


def stop_group(run_id: uuid.UUID) -> str:
    return f"stop_{run_id.hex}"


def conversation_group(conversation_id: int) -> str:
    return f"conversation_{conversation_id}"


async def announce_started(run: Run) -> None:
    """Tell every page open on the run's conversation that it started, so that each shows it."""
    layer = get_channel_layer()
    if layer is not None:
        started: ConversationRun = {"type": "conversation.run", "run": run.pk.hex}
        await group_send(layer, conversation_group(run.conversation_id), started)


async def announce_finished(
    run_id: uuid.UUID, status: RunStatus, *, seq: int | None = None, answer_length: int | None = None
) -> None:
    """Tell whoever follows the run that it ended (its outcome is saved: they read it from the database); ``seq`` and
    ``answer_length``: its last step and the length of its answer, when the one announcing it knows them (its
    recorder), so that a follower that has heard them all need not read the database for what it missed."""
    message: RunFinished = {"type": "run.finished", "run": run_id.hex, "status": status}
    if seq is not None and answer_length is not None:
        message["seq"], message["answer_length"] = seq, answer_length
    await publish(run_id, message)
    layer = get_channel_layer()
    if layer is not None and not local.in_process():
        await group_send(layer, end_group(run_id), message)


async def announce_deleted(conversation_id: int) -> None:
    """Tell every page open on the conversation that it was deleted: each closes its websocket."""
    layer = get_channel_layer()
    if layer is not None:
        deleted: ConversationDeleted = {"type": "conversation.deleted"}
        await group_send(layer, conversation_group(conversation_id), deleted)
