"""What a run did, as the API shows it (pydantic, in the OpenAPI document): its steps (tool calls, agents, failed model
calls), the main model's rounds, its usage (cost, tokens by model, carbon) and its sources (``Trace``), which the
responses, the runs and the stream's events carry."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

TOOL_REASON_CODE_DESCRIPTION = (
    "Set when the call was stopped with its run before it returned (a query interrupted, a script killed, a page "
    "read or a connector call aborted, a call waiting for its turn released): why the run stopped, as the run's and "
    "the agents' codes say it (`stopped_by_user`, `category_budget`, `cost_cap`, `server_shutdown`). The `agents` "
    "call not launched: `delegation_cap` (over its cap), or why its run stopped while the user was asked. Null "
    "otherwise."
)


class ActionOut(BaseModel):
    """What a tool call did, in the words the user reads (``query``: a data_query, its SQL and row count)."""

    kind: Literal["search", "read", "fetch", "code", "query", "result", "other"]
    label: str
    count: int | None = None
    demo_web: bool = False
    """A search or a read of the demo web (fictional pages shipped with the server, offline), not the internet."""


class SourceOut(BaseModel):
    id: str
    title: str
    kind: Literal["document", "page"] = "document"
    where: str = ""
    demo_web: bool = False
    """A page of the demo web (fictional, shipped with the server, read offline), not of the internet."""


class DelegationOut(BaseModel):
    """An `agents` call's estimate, worked out before its agents launch, and what became of it."""

    decision: Literal["launched", "refused", "asking", "declined", "unanswered", "stopped"] = Field(
        description="`launched`; `refused`: `estimate_max_eur` is over the cap (the request's `max_delegation_eur` "
        "or the organisation's), the agents were not launched and the main model was told so; in the chat, the user "
        "is asked first (`asking`), then `launched`, `declined`, `unanswered` (no answer in time) or `stopped`."
    )
    estimate_eur: float = Field(
        description="What it should cost: the agents' first requests, known before launch, and the growth per round "
        "of the organisation's recent agents on the same models (or a documented default)."
    )
    estimate_max_eur: float = Field(
        description="The most it can cost within its agents' round budgets: a bound the budgets enforce."
    )
    cap_eur: float | None = Field(default=None, description="The cap it was compared with; null: none.")
    tasks: int = Field(default=0, description="How many agents it launches, or would have.")


class ToolStep(BaseModel):
    """One tool call of the main model or of an agent (the `agents` call itself too: its `delegation` figures)."""

    type: Literal["tool_call"] = "tool_call"
    round: int
    tool: str
    ok: bool
    action: ActionOut | None = None
    error: str | None = None
    sources: list[SourceOut] = Field(default_factory=list)
    reason_code: str | None = Field(default=None, description=TOOL_REASON_CODE_DESCRIPTION)
    started: bool = Field(
        default=True, description="False: the call was stopped while it waited for its turn; it never started."
    )
    delegation: DelegationOut | None = Field(
        default=None, description="The `agents` call only: its estimate, its cap and whether it was launched."
    )


class ModelCallFailedStep(BaseModel):
    """A model call that failed: refused by the provider with an HTTP error (``billed`` false: it cost nothing)
    or cut after it was sent (a broken stream, a timeout: billed, estimated when the provider reported nothing)."""

    type: Literal["model_call_failed"] = "model_call_failed"
    round: int
    model: str
    error_kind: str = Field(
        description="rate_limited, server_error, bad_request, authentication, unreachable, timeout or broken_stream"
    )
    billed: bool
    status: int | None = Field(default=None, description="The provider's HTTP status, when it answered with one.")
    message: str = ""


ESTIMATED_EUR_DESCRIPTION = (
    "The part of `cost_eur` that was estimated: calls cut or aborted (a broken stream, a timeout, Stop) whose tokens "
    "were counted locally because the provider reported no usage. The rest was priced, from the catalogue, on the "
    "usage the provider reported."
)


class ModelUsageOut(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0
    cost_eur: float = 0.0
    tokens_estimated: int = Field(
        default=0, description="Calls cut after they were sent whose tokens are an estimate (no usage reported)."
    )
    failed_calls: int = Field(default=0, description="Calls that failed; those the provider refused billed nothing.")
    estimated_eur: float = Field(default=0.0, description=ESTIMATED_EUR_DESCRIPTION)
    energy_wh: float | None = Field(default=None, description="Null when the model has no carbon data.")
    carbon_g: float | None = Field(default=None, description="Grams CO2e; null when the model has no carbon data.")


class UsageOut(BaseModel):
    """Tokens (OpenAI's three totals), cost in EUR, tokens by model, energy and carbon, agents included once."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_eur: float = 0.0
    estimated_eur: float = Field(default=0.0, description=ESTIMATED_EUR_DESCRIPTION)
    energy_wh: float = 0.0
    carbon_g: float = 0.0
    carbon_estimated: bool = Field(default=False, description="False when some model had no carbon data.")
    tokens_estimated: int = Field(
        default=0, description="Calls cut after they were sent whose tokens are an estimate (no usage reported)."
    )
    failed_calls: int = Field(default=0, description="Calls that failed; those the provider refused billed nothing.")
    by_model: dict[str, ModelUsageOut] = Field(default_factory=dict)


AGENT_REASON_CODE_DESCRIPTION = (
    "Why the agent ended as it did, as a stable code (the run's `reason_code` vocabulary): `rounds`, `tokens`, "
    "`seconds`, `output_cut` (interrupted); `stopped_by_user`, `category_budget`, `cost_cap`, `spend_limit`, "
    "`delegation_cap`, `server_shutdown` (stopped); `model_error`, `tool_failed`, `invalid_result`, `no_result`, "
    "`run_ended` (error). Null when it simply returned, or for a run saved before codes existed."
)


class BudgetLeftOut(BaseModel):
    """What a working agent had left as its latest round started (the `Budget left:` line its model read)."""

    round: int = Field(description="The round that was starting.")
    rounds: int = Field(description="Rounds left, that round included.")
    tokens: int = Field(description="Tokens left of its token budget.")
    seconds: int = Field(description="Whole seconds left of its time budget.")


class AgentOut(BaseModel):
    id: str = Field(description="The agent's id, the same in the stream's events.")
    instruction: str
    model: str
    profile: str | None = None
    resources: list[str]
    max_rounds: int = Field(description="Its round budget: the level's, or fewer if the main model asked fewer.")
    rounds_asked: int | None = Field(
        default=None,
        description="The rounds the main model asked for it when more than the level allows (it got `max_rounds`, "
        "the level's budget); null otherwise.",
    )
    status: Literal["running", "ok", "interrupted", "stopped", "error"] = "running"
    reason: str = ""
    reason_code: str | None = Field(default=None, description=AGENT_REASON_CODE_DESCRIPTION)
    rounds: int = 0
    seconds: float = 0.0
    cost_eur: float = Field(default=0.0, description="Its cost so far while it runs, then in all.")
    estimated_eur: float = Field(default=0.0, description=ESTIMATED_EUR_DESCRIPTION)
    estimate_eur: float | None = Field(
        default=None,
        description="What it should cost, worked out before it launched (its share of its delegation's); compare "
        "`cost_eur`. Null for a run saved before estimates.",
    )
    estimate_max_eur: float | None = Field(
        default=None, description="The most it can cost within its round budget, worked out before it launched."
    )
    usage: UsageOut | None = Field(default=None, description="Its tokens so far while it runs, then in all.")
    budget_left: BudgetLeftOut | None = Field(
        default=None, description="While it works: what it had left as its latest round started; null once it ended."
    )
    report: str = ""
    sources: list[SourceOut] = Field(default_factory=list)
    forced_landing: bool = False
    steps: list[Annotated[ToolStep | ModelCallFailedStep, Field(discriminator="type")]] = Field(default_factory=list)


class AgentStep(BaseModel):
    """One delegated agent: its model, status, rounds, seconds, cost, report and its own steps."""

    type: Literal["run_agent"] = "run_agent"
    round: int
    agent: AgentOut


Step = Annotated[ToolStep | AgentStep | ModelCallFailedStep, Field(discriminator="type")]


class RoundOut(BaseModel):
    """One round of the main model (an agent's rounds are summed up in its step)."""

    round: int
    model: str
    forced: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_eur: float = 0.0
    estimated_eur: float = Field(default=0.0, description=ESTIMATED_EUR_DESCRIPTION)
    cost_source: Literal["reported", "estimated"] = Field(
        default="reported",
        description="`reported`: the round's model call was priced on the usage its provider reported; `estimated`: "
        "it was cut or aborted, and some or all of its tokens were counted locally (`estimated_eur`).",
    )


class Trace(BaseModel):
    """What a run did, as the API shows it."""

    steps: list[Step] = Field(default_factory=list)
    rounds: list[RoundOut] = Field(default_factory=list)
    usage: UsageOut = Field(default_factory=UsageOut)
    sources: list[SourceOut] = Field(default_factory=list)
