"""The API's bodies as pydantic models: they validate requests and generate the OpenAPI document.

The shapes follow OpenAI's chat completions, with the product's extensions: in the request
``tools_enabled``, ``reasoning_level`` and ``category``; in the response ``run_id``, ``status`` and
``reason`` (how the run ended: ``finish_reason`` is OpenAI's ``stop`` whatever the outcome),
``steps``, ``rounds``, ``sources`` and a ``usage`` that adds cost, tokens by model and carbon.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from assistant.engine.policy import Level

RESOURCE = re.compile(r"^(kb:[\w-]+|web|code|agents)$")


# Requests -----------------------------------------------------------------------------------------


def _without_nul(text: str) -> str:
    # A NUL character is no text (PostgreSQL refuses it in a text column): dropped, as from documents.
    return text.replace("\x00", "")


class TextPart(BaseModel):
    type: Literal["text"]
    text: str

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        return _without_nul(value)


class InputMessage(BaseModel):
    """One message of the conversation. Text only; tool calls of the client are not supported."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart] | None = None

    @field_validator("content")
    @classmethod
    def _content(cls, value: str | list[TextPart] | None) -> str | list[TextPart] | None:
        return _without_nul(value) if isinstance(value, str) else value

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text for p in self.content)
        return self.content or ""


class ChatCompletionRequest(BaseModel):
    """A request: OpenAI's fields (those without an equivalent here are accepted and ignored) and three extensions."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {
                    "model": "demo-large",
                    "tools_enabled": ["kb:factures", "kb:comptes-rendus", "agents"],
                    "messages": [
                        {"role": "user", "content": "Bimbamjob: invoicing 2024, follow-up. Conclude on the risk."}
                    ],
                }
            ]
        },
    )

    model: str
    messages: list[InputMessage] = Field(min_length=1)
    stream: bool = False
    tools_enabled: list[str] = Field(
        default_factory=list,
        description="The request's resources: `kb:<slug>` (a knowledge base), `web`, `code`, `agents` (delegation, "
        "with at least one other resource).",
    )
    reasoning_level: Level | None = Field(
        default=None,
        description="rapide, standard, approfondi or maximal; below approfondi `agents` is ignored; without a "
        "level, `agents` is honoured with the default budget.",
    )
    category: str = Field(default="", description="The task category's slug; empty for the organisation's default.")

    @field_validator("tools_enabled")
    @classmethod
    def _resources(cls, value: list[str]) -> list[str]:
        for resource in value:
            if not RESOURCE.match(resource):
                raise ValueError(f"unknown resource '{resource}': use kb:<slug>, web, code or agents")
        return list(dict.fromkeys(value))

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("a category's slug has no NUL character")
        return value

    @model_validator(mode="after")
    def _ends_with_the_question(self) -> ChatCompletionRequest:
        last = self.messages[-1]
        if last.role != "user" or not last.text.strip():
            raise ValueError("the messages must end with a non-empty user message")
        return self


# Steps, rounds, usage, sources --------------------------------------------------------------------


class ActionOut(BaseModel):
    """What a tool call did, in the words the user reads."""

    kind: Literal["search", "read", "fetch", "code", "other"]
    label: str
    count: int | None = None


class SourceOut(BaseModel):
    id: str
    title: str
    kind: Literal["document", "page"] = "document"
    where: str = ""


class ToolStep(BaseModel):
    """One tool call of the main model or of an agent."""

    type: Literal["tool_call"] = "tool_call"
    round: int
    tool: str
    ok: bool
    action: ActionOut | None = None
    error: str | None = None
    sources: list[SourceOut] = Field(default_factory=list)


class ModelUsageOut(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0
    cost_eur: float = 0.0
    energy_wh: float | None = Field(default=None, description="Null when the model has no carbon data.")
    carbon_g: float | None = Field(default=None, description="Grams CO2e; null when the model has no carbon data.")


class UsageOut(BaseModel):
    """Tokens (OpenAI's three totals), cost in EUR, tokens by model, energy and carbon, agents included once."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_eur: float = 0.0
    energy_wh: float = 0.0
    carbon_g: float = 0.0
    carbon_estimated: bool = Field(default=False, description="False when some model had no carbon data.")
    by_model: dict[str, ModelUsageOut] = Field(default_factory=dict)


REASON_CODE_DESCRIPTION = (
    "Why, as a stable code: `stopped_by_user`, `category_budget`, `cost_cap` (stopped); `model_error`, `tool_failed`, "
    "`process_died`, `not_taken`, `not_queued`, `server_stopped`, `refused`, `unexpected` (error); for an agent also "
    "`rounds`, `tokens`, `seconds`, `output_cut` (interrupted), `invalid_result`, `no_result`, `run_ended`. Null when "
    "it ended ok, or for a run saved before codes existed."
)


class AgentOut(BaseModel):
    id: str = Field(description="The agent's id, the same in the stream's events.")
    instruction: str
    model: str
    profile: str | None = None
    resources: list[str]
    max_rounds: int
    status: Literal["running", "ok", "interrupted", "stopped", "error"] = "running"
    reason: str = ""
    reason_code: str | None = Field(default=None, description=REASON_CODE_DESCRIPTION)
    rounds: int = 0
    seconds: float = 0.0
    cost_eur: float = 0.0
    usage: UsageOut | None = None
    report: str = ""
    sources: list[SourceOut] = Field(default_factory=list)
    forced_landing: bool = False
    steps: list[ToolStep] = Field(default_factory=list)


class AgentStep(BaseModel):
    """One delegated agent: its model, status, rounds, seconds, cost, report and its own steps."""

    type: Literal["run_agent"] = "run_agent"
    round: int
    agent: AgentOut


Step = Annotated[ToolStep | AgentStep, Field(discriminator="type")]


class RoundOut(BaseModel):
    """One round of the main model (an agent's rounds are summed up in its step)."""

    round: int
    model: str
    forced: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_eur: float = 0.0


RunStatusOut = Literal["running", "ok", "stopped", "error"]
# OpenAI's finish reasons, and nothing else: the run's own outcome is ``status``.
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]
EndedStatusOut = Literal["ok", "stopped", "error"]
STATUS_DESCRIPTION = (
    "How the run ended, as `GET /v1/runs/{run_id}` names it: `ok`, `stopped` (Stop, a cancel, a spent budget or a "
    "cost cap: the answer is what was written until then) or `error` (it failed; `reason` says why)."
)
REASON_DESCRIPTION = "Why the run stopped, or the error of a failed run, in plain words; empty when it ended ok."


class Trace(BaseModel):
    """What a run did, as the API shows it."""

    steps: list[Step] = Field(default_factory=list)
    rounds: list[RoundOut] = Field(default_factory=list)
    usage: UsageOut = Field(default_factory=UsageOut)
    sources: list[SourceOut] = Field(default_factory=list)


# Responses ----------------------------------------------------------------------------------------


class OutputMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: OutputMessage
    finish_reason: FinishReason = Field(
        description="One of OpenAI's values; this server answers `stop` however the run ended: whether it ended ok, "
        "was stopped or failed is in the response's `status`, and why in its `reason`."
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
    reason_code: str | None = Field(default=None, description=REASON_CODE_DESCRIPTION)


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
    reason_code: str | None = Field(default=None, description=REASON_CODE_DESCRIPTION)


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str
    name: str
    input_price_eur: float = Field(description="EUR per million input tokens.")
    cached_input_price_eur: float
    output_price_eur: float
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


class StreamEvent(BaseModel):
    """A stream chunk's ``event`` (its ``choices`` is then empty): an agent started, acted or ended, a tool ran.

    ``agent`` (the agent as it stands) comes with agent_started and agent_finished, ``step`` with
    agent_action and tool_call.
    """

    type: Literal["agent_started", "agent_action", "agent_finished", "tool_call"]
    agent_id: str | None = None
    agent: AgentOut | None = None
    step: ToolStep | None = None


def errors_schema(*codes: int) -> dict[int, Any]:
    return dict.fromkeys(codes, ErrorOut)
