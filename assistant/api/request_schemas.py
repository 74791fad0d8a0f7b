"""The request of ``POST /v1/chat/completions`` as pydantic models: OpenAI's chat completion fields (those without an
equivalent here accepted and ignored), checked as OpenAI checks them, and the product's extensions ``tools_enabled``,
``reasoning_level``, ``category``, ``max_delegation_eur`` and ``background``. They validate the body and generate
its part of the OpenAPI document."""

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
