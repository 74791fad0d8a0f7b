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


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation as a model sees it."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    @staticmethod
    def system(content: str) -> Message:
        return Message(role="system", content=content)

    @staticmethod
    def user(content: str) -> Message:
        return Message(role="user", content=content)

    @staticmethod
    def assistant(content: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return Message(role="assistant", content=content, tool_calls=tool_calls)

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


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call receives."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = None
    reasoning_effort: Effort | None = None
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


StreamPart: TypeAlias = TextDelta | ToolCallPart | UsagePart | FinishPart | AttemptCut


@dataclass(slots=True)
class ModelResponse:
    """A call's stream, gathered: text, tool calls, usage and why it finished."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: UsagePart | None = None
    finish_reason: FinishReason = "stop"
    cut_attempts: int = 0
    """Attempts that were sent, broke off before anything was shown, and were tried again (``AttemptCut``)."""

    def add(self, part: StreamPart) -> None:
        if isinstance(part, TextDelta):
            self.text += part.text
        elif isinstance(part, ToolCallPart):
            self.tool_calls.append(part.call)
        elif isinstance(part, UsagePart):
            self.usage = part
        elif isinstance(part, AttemptCut):
            self.cut_attempts += 1
        else:
            self.finish_reason = part.reason

    def as_message(self) -> Message:
        return Message.assistant(self.text, tuple(self.tool_calls))
