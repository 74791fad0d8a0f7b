"""The API's responses as pydantic models: a chat completion (OpenAI's shape, with ``run_id``, ``status``, ``reason``,
``warnings`` and the run's trace), a run, the models and OpenAI's error shape. They generate the OpenAPI
document."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .trace_schemas import Trace


class RequestWarning(BaseModel):
    """Something of the request the run does not do, and why (the run goes on without it)."""

    code: Literal["agents_off_at_level", "agents_without_cheaper_model", "parameter_not_sent"]
    message: str
    param: str | None = None


RunStatusOut = Literal["running", "ok", "stopped", "error"]
# OpenAI's finish reasons, and nothing else: the run's own outcome is ``status``.
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]
EndedStatusOut = Literal["ok", "stopped", "error"]
STATUS_DESCRIPTION = (
    "How the run ended, as `GET /v1/runs/{run_id}` names it: `ok`, `stopped` (Stop, a cancel, a spent budget or a "
    "cost cap: the answer is what was written until then) or `error` (it failed; `reason` says why)."
)
REASON_DESCRIPTION = "Why the run stopped, or the error of a failed run, in plain words; empty when it ended ok."
REASON_CODE_DESCRIPTION = (
    "Why the run stopped or failed, as a stable code (the agents' `reason_code` vocabulary). Stopped: "
    "`stopped_by_user` (Stop, a cancel), `category_budget` (its category's month crossed mid-way), `cost_cap` (a "
    "scheduled task's cap), `spend_limit`, `delegation_cap`, `server_shutdown` (the worker executing it was shut "
    "down). Failed: `model_error`, `tool_failed`, `infrastructure`, `refused`, `process_died`, `not_taken`, "
    "`not_queued`, `server_stopped`, `unexpected`. Empty when it ended ok or is running. Changed in 2026-12: was "
    "`user`, `budget`, `shutdown` and `error`."
)


REASONING_CONTENT = (
    "The main model's reasoning summaries, round by round, separated by a blank line (a reasoning model's, when its "
    "provider gives one: OpenAI's summaries, Magistral's thinking); null when it gave none. An agent's stays in "
    "its `agent` step."
)


class FunctionCallOut(BaseModel):
    name: str
    arguments: str = Field(description="The arguments the model wrote, as JSON text.")


class ToolCallOut(BaseModel):
    """A call of one of the client's tools, for the client to run: send its result back with this `id`."""

    id: str
    type: Literal["function"] = "function"
    function: FunctionCallOut


class OutputMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCallOut] | None = Field(
        default=None, description="The client's tools the main model called (`finish_reason` `tool_calls`)."
    )
    reasoning_content: str | None = Field(None, description=REASONING_CONTENT)


class Choice(BaseModel):
    index: int = 0
    message: OutputMessage
    finish_reason: FinishReason = Field(
        description="OpenAI's values: `stop`, `length` when a limit cut the answer (a category's budget, a cost "
        "cap), `tool_calls` when the main model called the client's tools (`message.tool_calls`). A stopped run is an "
        "answer (`status` `stopped`, `reason`); a failed run is an error, not a response."
    )
    logprobs: None = None


class ChatCompletion(Trace):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    run_id: str = Field(description="Follow or cancel the run with /v1/runs/{run_id}.")
    status: EndedStatusOut = Field(description=STATUS_DESCRIPTION)
    reason: str = Field(default="", description=REASON_DESCRIPTION)
    reason_code: str = Field(default="", description=REASON_CODE_DESCRIPTION)
    warnings: list[RequestWarning] = Field(
        default_factory=list,
        description="What of the request the run does not do: `agents` at a level whose agent round budget is 0, "
        "or with no allowed model cheap enough to delegate to. Also in the stream's first chunk.",
    )


class RunOut(Trace):
    id: str
    object: Literal["run"] = "run"
    created: int
    finished: int | None = None
    model: str
    reasoning_level: str | None = None
    tools_enabled: list[str]
    category: str
    status: RunStatusOut = Field(description="`running`, then how the run ended: `ok`, `stopped` or `error`.")
    stop_requested: bool
    answer: str = Field(description="The answer so far (whole once the run has ended).")
    reason: str = Field(default="", description=REASON_DESCRIPTION)
    reason_code: str = Field(default="", description=REASON_CODE_DESCRIPTION)
    tool_calls: list[ToolCallOut] | None = Field(
        default=None,
        description="When the run ended on the client's tools: its calls, with the ids a follow-up answers them by.",
    )


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default=0, description="When the model was added to this server's catalogue (Unix seconds).")
    owned_by: str
    name: str
    input_price_eur: float = Field(description="EUR per million input tokens.")
    cached_input_price_eur: float
    output_price_eur: float
    price_date: str | None = Field(
        default=None, description="When the catalogue recorded these prices (ISO date); null when unknown."
    )
    context_window: int
    output_cap: int
    reasoning_efforts: list[str]


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None
    resets_at: str | None = Field(default=None, description="For an exhausted category: when its budget resets.")


class ErrorOut(BaseModel):
    error: ErrorBody


def errors_schema(*codes: int) -> dict[int, Any]:
    return dict.fromkeys(codes, ErrorOut)
