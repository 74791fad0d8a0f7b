"""Provider-neutral values: messages, tools, tool calls, model requests and stream parts.

They are frozen values; identity and persistence live elsewhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
Effort: TypeAlias = Literal["minimal", "low", "medium", "high"]
EFFORTS: tuple[Effort, ...] = ("minimal", "low", "medium", "high")
FinishReason: TypeAlias = Literal["stop", "tool_calls", "length"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a tool by a model; ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ``ValueError`` when the JSON is invalid or not an object."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value


ReasoningFormat: TypeAlias = Literal["openai", "mistral", "demo"]
"""Whose wire a reasoning part comes from, and goes back to: OpenAI's Responses API (a ``reasoning`` item), Mistral's
chat completions (a ``thinking`` chunk); the offline demo's (a summary only, which no adapter sends anywhere)."""


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A model's reasoning in one turn, as its provider returned it: a part of the assistant turn.

    It goes back verbatim, in its place, in the next requests of the same loop (the main model's, or one agent's),
    and only to an adapter of the same ``format``; no other loop ever sees it (an agent starts from a fresh history,
    and a conversation's earlier turns are read back from the database, without it). OpenAI's: the reasoning item's
    ``id`` and ``encrypted`` content (``store: false`` keeps nothing on OpenAI's side), and its ``summary`` parts.
    Mistral's: the thinking text (in ``summary``, one part) and its ``signature``.
    """

    format: ReasoningFormat
    model: str = ""
    """The model that reasoned (its name at its provider): an adapter sends back only its own model's reasoning."""
    id: str = ""
    """OpenAI's item id (``rs_…``); Mistral's thinking has none: ``thinking-<n>``, its rank in the turn."""
    encrypted: str = ""
    """OpenAI's ``encrypted_content``: the reasoning itself, opaque; without it, a reasoning item is refused."""
    signature: str = ""
    """Mistral's ``signature`` of the thinking, where in the stream it came."""
    summary: tuple[str, ...] = ()
    """What a reader may see of it: OpenAI's summary parts, Mistral's thinking text."""
    summary_unavailable: bool = False
    """OpenAI refused a summary for this key (an organisation it has not verified): the model reasoned, unsaid."""
    before: int = 0
    """Its place in the turn: the index of the first tool call that came after it (``len(tool_calls)``: none did).
    The turn's text comes after the reasoning placed at 0."""

    @property
    def text(self) -> str:
        """The summary as one text, its parts separated by a blank line."""
        return "\n\n".join(part for part in self.summary if part)


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation as a model sees it."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: tuple[Reasoning, ...] = ()
    """An assistant turn's reasoning, in the order it came (``Reasoning.before`` places each among the calls)."""

    @staticmethod
    def system(content: str) -> Message:
        return Message(role="system", content=content)

    @staticmethod
    def user(content: str) -> Message:
        return Message(role="user", content=content)

    @staticmethod
    def assistant(
        content: str = "", tool_calls: tuple[ToolCall, ...] = (), reasoning: tuple[Reasoning, ...] = ()
    ) -> Message:
        return Message(role="assistant", content=content, tool_calls=tool_calls, reasoning=reasoning)

    @staticmethod
    def tool(call: ToolCall, content: str) -> Message:
        return Message(role="tool", content=content, tool_call_id=call.id, name=call.name)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about a tool: its name, description and JSON schema of arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NamedTool:
    """``tool_choice`` forcing one named function (the forced landing)."""

    name: str


ToolChoice: TypeAlias = Literal["auto", "required", "none"] | NamedTool


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientTools:
    """An API client's function tools, offered to the main model beside the server's (never to an agent): the main
    model calling one ends the run's turn, and the client runs it. ``choice`` applies to the run's first main-model
    call only (later rounds use ``auto``); ``parallel``: the client's ``parallel_tool_calls`` (None: not set)."""

    specs: tuple[ToolSpec, ...]
    choice: ToolChoice = "auto"
    parallel: bool | None = None

    @property
    def names(self) -> frozenset[str]:
        return frozenset(s.name for s in self.specs)

    def as_json(self) -> dict[str, Any]:
        """What a run keeps of them (``of`` reads it back)."""
        choice = self.choice
        return {
            "tools": [{"name": s.name, "description": s.description, "parameters": s.parameters} for s in self.specs],
            "choice": {"name": choice.name} if isinstance(choice, NamedTool) else choice,
            "parallel": self.parallel,
        }

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> ClientTools | None:
        """A run's kept client tools (``as_json``), or None when it had none."""
        if not data or not data.get("tools"):
            return None
        raw = data.get("choice", "auto")
        choice: ToolChoice = NamedTool(str(raw["name"])) if isinstance(raw, dict) else raw
        return cls(specs=tuple(ToolSpec(**t) for t in data["tools"]), choice=choice, parallel=data.get("parallel"))


SAMPLING_PARAMETERS: tuple[str, ...] = (
    "temperature",
    "top_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "user",
    "response_format",
)
"""What a client may set for the main model's calls (OpenAI's names), beside the output cap."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sampling:
    """What an API client set for the main model's calls: its output cap, its sampling and its answer's format
    (OpenAI's names and shapes). Agents keep their own settings; a parameter a model does not take is not sent
    (``Model.dropped``)."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    user: str | None = None
    response_format: dict[str, Any] | None = None
    """OpenAI's ``response_format``: ``{"type": "json_object"}`` or ``{"type": "json_schema", "json_schema": {...}}``."""

    def given(self) -> dict[str, Any]:
        """The sampling parameters set (not the output cap), by OpenAI's names, as sent on the wire."""
        values: dict[str, Any] = {}
        for name in SAMPLING_PARAMETERS:
            value = getattr(self, name)
            if value is not None and value != ():
                values[name] = list(value) if name == "stop" else value
        return values

    def as_json(self) -> dict[str, Any]:
        """What a run keeps of it (``of`` reads it back)."""
        data = self.given()
        if self.max_tokens is not None:
            data["max_tokens"] = self.max_tokens
        return data

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> Sampling | None:
        """A run's kept sampling (``as_json``), or None when it set nothing."""
        if not data:
            return None
        return cls(**{**data, "stop": tuple(data.get("stop") or ())})


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call receives."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = None
    reasoning_effort: Effort | None = None
    sampling: Sampling | None = None
    """The API client's sampling and format (the main model's calls only); its output cap is ``max_output_tokens``."""
    language: str | None = None
    """The reader's interface language (a language code, e.g. ``fr``). Providers do not send it; the offline demo
    model writes in it when it cannot tell the question's language."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's text, as it arrives."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A complete tool call (adapters accumulate streamed argument deltas before yielding it)."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class ReasoningPart:
    """A reasoning of the turn, complete (OpenAI: its item done). A later part with the same ``id`` replaces it (a
    signature that came after the thinking)."""

    reasoning: Reasoning


@dataclass(frozen=True, slots=True)
class UsagePart:
    """Token usage reported by the provider for the call."""

    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True)
class FinishPart:
    """Why the model stopped."""

    reason: FinishReason


@dataclass(frozen=True, slots=True)
class AttemptCut:
    """An attempt of the call that reached the provider and broke off before anything of it was shown; the adapter
    tries again. The provider bills it as a call: it is counted as an estimate of what it was sent."""


@dataclass(frozen=True, slots=True)
class ResponseModel:
    """The model the provider says answered (its response's ``model``), as it names it."""

    name: str


StreamPart: TypeAlias = TextDelta | ToolCallPart | ReasoningPart | UsagePart | FinishPart | AttemptCut | ResponseModel


@dataclass(slots=True)
class ModelResponse:
    """A call's stream, gathered: text, tool calls, usage and why it finished."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: UsagePart | None = None
    finish_reason: FinishReason = "stop"
    cut_attempts: int = 0
    """Attempts that were sent, broke off before anything was shown, and were tried again (``AttemptCut``)."""
    model: str = ""
    """The model the provider says answered ("" when it said none)."""
    reasoning: list[Reasoning] = field(default_factory=list)
    """The turn's reasoning, in order (the same id twice: the later one kept in the earlier one's place)."""

    def add(self, part: StreamPart) -> None:
        if isinstance(part, TextDelta):
            self.text += part.text
        elif isinstance(part, ToolCallPart):
            self.tool_calls.append(part.call)
        elif isinstance(part, ReasoningPart):
            same = [i for i, r in enumerate(self.reasoning) if r.id == part.reasoning.id and part.reasoning.id]
            if same:
                self.reasoning[same[0]] = part.reasoning
            else:
                self.reasoning.append(part.reasoning)
        elif isinstance(part, UsagePart):
            self.usage = part
        elif isinstance(part, AttemptCut):
            self.cut_attempts += 1
        elif isinstance(part, ResponseModel):
            self.model = part.name
        else:
            self.finish_reason = part.reason

    def as_message(self) -> Message:
        return Message.assistant(self.text, tuple(self.tool_calls), tuple(self.reasoning))
