"""A streamed chat completion's chunks (``text/event-stream``, OpenAI's ``chat.completion.chunk``), their events and a
failed run's error, as pydantic models: the OpenAPI document describes them beside the operations' own bodies
(``STREAM_SCHEMAS``, read by ``api.DocumentedApi``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from .response_schemas import REASON_DESCRIPTION, ErrorBody, FinishReason, RequestWarning
from .trace_schemas import AgentOut, RoundOut, SourceOut, Step, ToolStep, UsageOut


class StreamEvent(BaseModel):
    """A stream chunk's ``event`` (its ``choices`` is then empty): an agent started, acted, spent or ended, a tool
    ran.

    ``agent`` (the agent as it stands) comes with agent_started and agent_finished, ``step`` with
    agent_action and tool_call; ``cost_eur`` and ``usage`` (the agent's so far) with agent_action and agent_usage
    (after each of the agent's model calls).
    """

    type: Literal["agent_started", "agent_action", "agent_usage", "agent_finished", "tool_call"]
    agent_id: str | None = None
    agent: AgentOut | None = None
    step: ToolStep | None = None
    cost_eur: float | None = Field(default=None, description="The agent's cost so far (EUR).")
    usage: UsageOut | None = Field(default=None, description="The agent's tokens so far.")


class RunErrorBody(ErrorBody):
    """A failed run's error: OpenAI's fields (``code``: ``upstream_error``, ``upstream_timeout``,
    ``upstream_rate_limited``, ``upstream_rejected``, ``upstream_auth``, ``upstream_incomplete``, ``internal_error``)
    and the run as it ended."""

    run_id: str
    status: Literal["error"] = "error"
    reason: str = Field(default="", description=REASON_DESCRIPTION)
    reason_code: str = ""
    answer: str = Field(default="", description="The text written before it failed.")
    steps: list[Step] = Field(default_factory=list)
    rounds: list[RoundOut] = Field(default_factory=list)
    usage: UsageOut = Field(default_factory=UsageOut)
    sources: list[SourceOut] = Field(default_factory=list)
    warnings: list[RequestWarning] = Field(default_factory=list)


class RunErrorOut(BaseModel):
    """A failed run, not streamed (an HTTP error), or the data of a stream's error event (after a 200)."""

    error: RunErrorBody


class ChunkFunction(BaseModel):
    name: str | None = None
    arguments: str | None = None


class ChunkToolCall(BaseModel):
    """A call of one of the client's tools, in OpenAI's delta shape (here each call whole in one delta)."""

    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: ChunkFunction


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = Field(
        None,
        description="A reasoning summary of the main model's current round, whole, before that round's `content` "
        "deltas (a round after the first starts with a blank line).",
    )
    tool_calls: list[ChunkToolCall] | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: FinishReason | None = None


class ChatCompletionChunk(BaseModel):
    """One event of a streamed response (``data: {...}``), in OpenAI's ``chat.completion.chunk`` shape. The first
    carries ``run_id`` and ``warnings``; one with an empty ``choices`` carries an ``event`` (an agent's or a tool's);
    the last before ``data: [DONE]`` carries the run's end (``usage``, ``steps``, ``rounds``, ``sources``,
    ``status``, ``reason``, ``reason_code``). A failed run's stream ends instead with one event whose data is a
    ``RunErrorOut``."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    run_id: str | None = None
    warnings: list[RequestWarning] | None = None
    event: StreamEvent | None = None
    usage: UsageOut | None = None
    steps: list[Step] | None = None
    rounds: list[RoundOut] | None = None
    sources: list[SourceOut] | None = None
    status: Literal["ok", "stopped"] | None = None
    reason: str | None = None
    reason_code: str | None = None


# What the OpenAPI document describes beside the operations' own bodies (``api.DocumentedApi``).
STREAM_SCHEMAS: tuple[type[BaseModel], ...] = (ChatCompletionChunk, RunErrorOut)
