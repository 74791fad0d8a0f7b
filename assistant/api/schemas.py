"""The API's bodies as pydantic models: they validate requests and generate the OpenAPI document.

The shapes follow OpenAI's chat completions, with the product's extensions: in the request
``tools_enabled``, ``reasoning_level`` and ``category``; in the response ``run_id``, ``status`` and
``reason`` (how the run ended; a failed run is an error in OpenAI's shape, with the run in it),
``steps``, ``rounds``, ``sources`` and a ``usage`` that adds cost, tokens by model and carbon.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator, model_validator

from assistant.engine.policy import LEVELS, Level
from assistant.engine.tools import is_server_tool
from assistant.engine.types import ClientTools, NamedTool, Sampling, ToolChoice, ToolSpec

RESOURCE = re.compile(r"^(kb:[\w-]+|doc:[\w-]+/[\w-]+|mcp:[\w-]+|web|code|agents)$")
# C0 and C1 controls but tab, line feed and carriage return; lone UTF-16 surrogates (no text can hold one).
NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
# Level names in any case, and their English names.
LEVEL_NAMES: dict[str, Level] = {
    **{lv: lv for lv in LEVELS},
    "fast": "rapide",
    "deep": "approfondi",
    "thorough": "approfondi",
    "maximum": "maximal",
}


# Requests -----------------------------------------------------------------------------------------


def _text(value: str) -> str:
    """A message's text, refused when it holds what no text holds (stored, it would fail or be lost)."""
    found = NOT_TEXT.search(value)
    if found is not None:
        char = found.group()
        raise ValueError(
            f"the text holds {'a lone surrogate' if 0xD800 <= ord(char) <= 0xDFFF else 'a control character'} "
            f"U+{ord(char):04X} at character {found.start()}: send text (tab, line feed and carriage return are "
            "the only controls taken)"
        )
    return value


class TextPart(BaseModel):
    type: Literal["text"]
    text: str

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        return _text(value)


TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"


class FunctionCallIn(BaseModel):
    name: str = Field(max_length=64)
    arguments: str = ""


class ToolCallIn(BaseModel):
    """A tool call of an earlier assistant message, as the client received it (our id, for a turn that ended on the
    client's tools)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=200)
    type: Literal["function"] = "function"
    function: FunctionCallIn


class InputMessage(BaseModel):
    """One message of the conversation: text, an assistant's calls of the client's tools (``tool_calls``), or a
    tool's result (``role`` ``tool``, answering one of them by its ``tool_call_id``)."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    tool_calls: list[ToolCallIn] | None = Field(default=None, description="An assistant message's tool calls.")
    tool_call_id: str | None = Field(
        default=None, max_length=200, description="A `tool` message's: the call it answers."
    )

    @field_validator("content")
    @classmethod
    def _content(cls, value: str | list[TextPart] | None) -> str | list[TextPart] | None:
        return _text(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _tool_fields(self) -> InputMessage:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a `tool` message needs the `tool_call_id` of the call it answers")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only an assistant message has `tool_calls`")
        return self

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text for p in self.content)
        return self.content or ""


class JsonSchemaFormat(BaseModel):
    """``response_format.json_schema``, as OpenAI takes it."""

    name: str = Field(max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    """The answer's format: `text`, `json_object` (a JSON object) or `json_schema` (one that fits the schema)."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("`json_schema` is required with the type json_schema")
        return self


class FunctionDefinition(BaseModel):
    name: str = Field(pattern=TOOL_NAME, description="Letters, digits, `_` and `-`, up to 64; not a server tool's.")
    description: str | None = None
    parameters: dict[str, Any] | None = Field(default=None, description="A JSON schema of the arguments.")
    strict: bool | None = None

    @field_validator("name")
    @classmethod
    def _not_the_servers(cls, value: str) -> str:
        if is_server_tool(value):
            raise ValueError(
                f"{value!r} is the name of one of the server's own tools (kb_search, kb_read, data_tables, data_query, "
                "web_search, web_fetch, run_code, agents, submit_result, mcp_…): give your tool another name"
            )
        return value


class FunctionTool(BaseModel):
    """A function tool of the client: offered to the main model beside the server's tools, run by the client."""

    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(BaseModel):
    name: str


class NamedToolChoice(BaseModel):
    type: Literal["function"]
    function: NamedFunction


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

    model: str = Field(max_length=200)
    messages: list[InputMessage] = Field(
        min_length=1, description="Text messages ending with the user's question; at most API_MAX_MESSAGES (500)."
    )
    stream: StrictBool = False
    tools_enabled: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="The request's resources: `kb:<slug>` (a knowledge base), `doc:<slug>/<id>` (one document "
        "of a base, e.g. `doc:factures/doc-12`: that document only), `mcp:<name>` (a connector), `web`, `code`, "
        "`agents` (delegation, with at least one other resource).",
    )
    reasoning_level: Level | None = Field(
        default=None,
        description="rapide, standard, approfondi or maximal, in any case (also fast, deep, maximum); below "
        "approfondi, or where the organisation's agent round budget is 0, `agents` is off (the response's `warnings` "
        "says so); without a level, `agents` is honoured with the default budget.",
    )
    category: str = Field(
        default="", max_length=100, description="The task category's slug; empty for the organisation's default."
    )
    max_delegation_eur: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description="The most one delegation of the run may cost, in EUR. Before launching agents, the `agents` tool "
        "works out the most they can cost within their round budgets (`estimate_max_eur`); over this cap (or over the "
        "organisation's, whichever is lower) they are not launched, and the main model is told so with both estimates "
        "and the cap (the `agents` step says it: `delegation`). Null: only the organisation's cap, if any.",
    )
    background: StrictBool = Field(
        default=False,
        description="Keep the run going when the client closes its connection (else it stops, as Stop does); "
        "`GET /v1/runs/{run_id}` follows it.",
    )
    # OpenAI's sampling and format: the main model's calls only (agents keep their own settings); one its model or
    # provider does not take is not sent, and the response's ``warnings`` says so.
    max_tokens: int | None = Field(default=None, ge=1, description="Caps each main-model call's output.")
    max_completion_tokens: int | None = Field(default=None, ge=1, description="As `max_tokens` (it wins).")
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    stop: str | list[Annotated[str, Field(min_length=1)]] | None = Field(default=None, description="Up to 4.")
    seed: int | None = None
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    user: str | None = Field(default=None, max_length=256)
    response_format: ResponseFormat | None = Field(
        default=None, description="Sent on every main-model call; shapes the answer (not the agents')."
    )
    n: int | None = Field(default=None, ge=1, le=1, description="One choice per request: only 1.")
    # The client's own tools: the main model's only (agents never get them); a call of one ends the turn.
    tools: list[FunctionTool] | None = Field(
        default=None,
        max_length=128,
        description="The client's function tools, offered to the main model beside the server's own (never to an "
        "agent). When the model calls one, the answer ends with `finish_reason` `tool_calls` and `message.tool_calls`; "
        "send the results back (`role` `tool`) to continue.",
    )
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = Field(
        default=None, description="For the run's first main-model call; later rounds use `auto`."
    )
    parallel_tool_calls: StrictBool | None = None

    @field_validator("messages", mode="before")
    @classmethod
    def _not_too_many(cls, value: Any) -> Any:
        most = settings.API_MAX_MESSAGES
        if isinstance(value, list) and len(value) > most:
            raise ValueError(f"{len(value)} messages: at most {most} in one request (API_MAX_MESSAGES)")
        return value

    @field_validator("messages")
    @classmethod
    def _ends_with_the_question(cls, value: list[InputMessage]) -> list[InputMessage]:
        _answered(value)
        last = value[-1]
        if last.role != "tool" and (last.role != "user" or not last.text.strip()):
            raise ValueError("the messages must end with a non-empty user message, or with the results of tool calls")
        if not any(m.role == "user" and m.text.strip() for m in value):
            raise ValueError("the messages must hold a non-empty user message")
        return value

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[FunctionTool] | None) -> list[FunctionTool] | None:
        names = [t.function.name for t in value or ()]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two tools named {twice[0]!r}: each tool needs its own name")
        return value

    @field_validator("tool_choice")
    @classmethod
    def _tool_choice(cls, value: str | NamedToolChoice | None, info: ValidationInfo) -> str | NamedToolChoice | None:
        validated = info.data  # the fields before it, ``tools`` among them
        names = {t.function.name for t in validated.get("tools") or ()}
        if isinstance(value, NamedToolChoice) and value.function.name not in names:
            raise ValueError(f"it names {value.function.name!r}, which is none of `tools`")
        if value == "required" and not names:
            raise ValueError("`required` needs `tools`")
        return value

    def client_tools(self) -> ClientTools | None:
        """The client's tools for the main model, or None."""
        if not self.tools:
            return None
        choice: ToolChoice = "auto"
        if isinstance(self.tool_choice, NamedToolChoice):
            choice = NamedTool(self.tool_choice.function.name)
        elif self.tool_choice is not None:
            choice = self.tool_choice
        specs = tuple(
            ToolSpec(
                name=t.function.name,
                description=t.function.description or "",
                parameters=t.function.parameters or {"type": "object", "properties": {}},
            )
            for t in self.tools
        )
        return ClientTools(specs=specs, choice=choice, parallel=self.parallel_tool_calls)

    @field_validator("reasoning_level", mode="before")
    @classmethod
    def _level(cls, value: Any) -> Any:
        if isinstance(value, str):
            return LEVEL_NAMES.get(value.strip().lower(), value)
        return value

    @field_validator("tools_enabled")
    @classmethod
    def _resources(cls, value: list[str]) -> list[str]:
        for resource in value:
            if not RESOURCE.match(resource):
                raise ValueError(
                    f"unknown resource {resource!r}: use kb:<slug>, doc:<slug>/<id>, mcp:<name>, web, code or agents"
                )
        return list(dict.fromkeys(value))

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > 4:
            raise ValueError("at most 4 stop sequences")
        return value

    def sampling(self) -> Sampling | None:
        """What the request sets for the main model's calls, or None."""
        fmt = self.response_format
        sampling = Sampling(
            max_tokens=self.max_completion_tokens or self.max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stop=(self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ()),
            seed=self.seed,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
            user=self.user,
            response_format=fmt.model_dump(by_alias=True, exclude_none=True) if fmt and fmt.type != "text" else None,
        )
        return sampling if sampling.as_json() else None

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        if NOT_TEXT.search(value):
            raise ValueError("a category's slug holds no control character")
        return value


def _answered(messages: list[InputMessage]) -> None:
    """Each ``tool`` message answers a call of the assistant message before it, and each such call is answered, as
    OpenAI requires."""
    waiting: set[str] | None = None
    for i, m in enumerate(messages):
        if m.role == "tool":
            if waiting is None or m.tool_call_id not in waiting:
                raise ValueError(
                    f"messages[{i}] (a `tool` message) answers no tool call of the assistant message before it "
                    f"(`tool_call_id` {m.tool_call_id!r})"
                )
            waiting.discard(m.tool_call_id)
            continue
        if waiting:
            raise ValueError(f"the tool calls {sorted(waiting)} have no `tool` message answering them")
        waiting = {c.id for c in m.tool_calls} if m.role == "assistant" and m.tool_calls else None
    if waiting:
        raise ValueError(f"the tool calls {sorted(waiting)} have no `tool` message answering them")


class RequestWarning(BaseModel):
    """Something of the request the run does not do, and why (the run goes on without it)."""

    code: Literal["agents_off_at_level", "agents_without_cheaper_model", "parameter_not_sent"]
    message: str
    param: str | None = None


# Steps, rounds, usage, sources --------------------------------------------------------------------


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


class Trace(BaseModel):
    """What a run did, as the API shows it."""

    steps: list[Step] = Field(default_factory=list)
    rounds: list[RoundOut] = Field(default_factory=list)
    usage: UsageOut = Field(default_factory=UsageOut)
    sources: list[SourceOut] = Field(default_factory=list)


# Responses ----------------------------------------------------------------------------------------


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


# What the OpenAPI document describes beside the operations' own bodies (``api.StreamingApi``).
STREAM_SCHEMAS: tuple[type[BaseModel], ...] = (ChatCompletionChunk, RunErrorOut)


def errors_schema(*codes: int) -> dict[int, Any]:
    return dict.fromkeys(codes, ErrorOut)
