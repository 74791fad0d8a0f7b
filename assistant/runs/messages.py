"""The channel-layer messages of a run's life, as typed dicts (what Channels sends is a dict; these say which).

``groups`` names the groups they go to. A run's followers hear ``RunEvent`` then ``RunFinished`` (``RunMessage``);
the process executing it hears ``RunStop`` and ``RunAnswer``; a conversation's open pages hear ``ConversationRun`` and
``ConversationDeleted``. What comes from a shared layer (Redis) is read at the consumer's edge as these.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

from channels.layers import BaseChannelLayer

from assistant.engine.events import RunStatus


class RunEvent(TypedDict):
    """One event of the run, as its recorder published it: a step (``text_offset``: the answer's length then) or a
    piece of the answer (``offset``: where it starts in the answer)."""

    type: Literal["run.event"]
    run: str
    seq: int
    event: dict[str, Any]
    """``steps.save_event``'s JSON of the event."""
    t: float
    """When it left the engine (``time.monotonic``), to measure delivery."""
    text_offset: NotRequired[int]
    offset: NotRequired[int]


class RunFinished(TypedDict):
    """The run ended (its outcome is saved); ``seq`` and ``answer_length`` when the announcer knows them (its
    recorder), so that a follower that has heard everything need not read the database."""

    type: Literal["run.finished"]
    run: str
    status: RunStatus
    """How it ended: the engine's ``RunStatus``, as ``Run.Status`` saves it."""
    seq: NotRequired[int]
    answer_length: NotRequired[int]


RunMessage: TypeAlias = RunEvent | RunFinished


class RunStop(TypedDict):
    """Stop, to the process executing the run."""

    type: Literal["run.stop"]
    cause: dict[str, Any]
    """Why: a ``Cause`` of ``engine.causes`` (one a run is stopped with), as JSON."""


class RunAnswer(TypedDict):
    """The user's answer to a question the run asked (a delegation over its cap), to the process executing the run."""

    type: Literal["run.answer"]
    question: str
    """The question's key (``DelegationEstimated.question``)."""
    launch: bool


class ConversationRun(TypedDict):
    """A run started in the conversation."""

    type: Literal["conversation.run"]
    run: str


class ConversationDeleted(TypedDict):
    """The conversation was deleted: its pages close."""

    type: Literal["conversation.deleted"]


ChannelMessage: TypeAlias = RunEvent | RunFinished | RunStop | RunAnswer | ConversationRun | ConversationDeleted


async def group_send(layer: BaseChannelLayer, group: str, message: ChannelMessage) -> None:
    """``layer.group_send`` of one of these (Channels types a message as a plain dict: this is a shallow copy)."""
    await layer.group_send(group, dict(message))
