"""The typed event stream of a run.

Every thing that happens in a run is one of these events, in order. The Django side persists them
as steps and pushes them to the browser; the API serialises them. Events of a sub-agent carry its
``agent_id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

AgentStatus: TypeAlias = Literal["ok", "interrupted", "stopped", "error"]
RunStatus: TypeAlias = Literal["ok", "stopped", "error"]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True)


class Source(_Value):
    """A document or page that was read, by the main model or by an agent."""

    id: str
    title: str
    kind: Literal["document", "page"] = "document"
    where: str = ""
    start: int | None = None
    """Where the part of the document that a read returned begins (a character offset in its text)."""
    end: int | None = None
    """Where it ends (exclusive): the page of the document marks ``start:end`` as read."""


class ChosenDocument(_Value):
    """A document of a base handed to an agent on its own (``doc:<kb>/<id>``), with the title its line shows."""

    id: str
    kb: str
    title: str

    @property
    def resource(self) -> str:
        return f"doc:{self.kb}/{self.id}"


class Action(_Value):
    """What one tool call did, in the words the user reads: a search with its query and count, a read, a query
    (its SQL and row count)."""

    tool: str
    kind: Literal["search", "read", "fetch", "code", "query", "other"]
    label: str
    count: int | None = None
    ok: bool = True


class _Event(_Value):
    agent_id: str | None = None


class RoundStarted(_Event):
    kind: Literal["round_started"] = "round_started"
    round: int
    model: str
    forced: bool = False


class TextDeltaEvent(_Event):
    kind: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallEvent(_Event):
    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any]


class ToolResultEvent(_Event):
    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    ok: bool
    action: Action | None = None
    sources: tuple[Source, ...] = ()
    error: str | None = None


class AgentStarted(_Event):
    kind: Literal["agent_started"] = "agent_started"
    agent_id: str
    instruction: str
    model: str
    model_label: str
    resources: tuple[str, ...]
    profile: str | None = None
    max_rounds: int
    documents: tuple[ChosenDocument, ...] = ()
    """The chosen documents among ``resources`` (its ``doc:`` entries), with their titles."""


class AgentAction(_Event):
    kind: Literal["agent_action"] = "agent_action"
    agent_id: str
    action: Action
    sources: tuple[Source, ...] = ()
    """What this action read: saved as it happens, so a run whose process dies still knows what its agents read."""


class AgentFinished(_Event):
    kind: Literal["agent_finished"] = "agent_finished"
    agent_id: str
    model: str
    status: AgentStatus
    reason: str = ""
    rounds: int
    seconds: float
    cost_eur: float
    usage: dict[str, Any]
    report: str
    tools_run: tuple[str, ...] = ()
    sources: tuple[Source, ...] = ()
    forced_landing: bool = False


class UsageEvent(_Event):
    kind: Literal["usage"] = "usage"
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0
    cost_eur: float
    energy_wh: float = 0.0
    carbon_g: float = 0.0
    estimated: bool = False
    """The provider reported no usage (the call was cut): these tokens are an estimate of what was sent and streamed."""


ModelErrorKind: TypeAlias = Literal[
    "rate_limited", "server_error", "bad_request", "authentication", "unreachable", "timeout", "broken_stream"
]


class ModelCallFailed(_Event):
    """A model call that failed: refused by the provider (``billed`` false) or cut after it was sent (billed)."""

    kind: Literal["model_call_failed"] = "model_call_failed"
    model: str
    error_kind: ModelErrorKind
    billed: bool
    status: int | None = None
    """The provider's HTTP status, when it answered with one."""
    message: str = ""


class FinalEvent(_Event):
    kind: Literal["final"] = "final"
    text: str
    rounds: int
    sources: tuple[Source, ...] = ()
    usage: dict[str, Any]


class ErrorEvent(_Event):
    kind: Literal["error"] = "error"
    message: str


class StoppedEvent(_Event):
    kind: Literal["stopped"] = "stopped"
    message: str
    text: str
    rounds: int
    sources: tuple[Source, ...] = ()
    usage: dict[str, Any]


Event: TypeAlias = Annotated[
    RoundStarted
    | TextDeltaEvent
    | ToolCallEvent
    | ToolResultEvent
    | AgentStarted
    | AgentAction
    | AgentFinished
    | UsageEvent
    | ModelCallFailed
    | FinalEvent
    | ErrorEvent
    | StoppedEvent,
    Field(discriminator="kind"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild a persisted event."""
    return EVENT_ADAPTER.validate_python(data)


def keep_sources(into: dict[str, Source], sources: Iterable[Source]) -> None:
    """Add the sources ``into`` lacks, by id, the first one seen kept: how a run and an agent gather theirs."""
    for s in sources:
        into.setdefault(s.id, s)


def sources_read(events: Iterable[Event]) -> list[Source]:
    """What a run's events say was read, by the main model (its tool results) and by its agents (each action, and
    what each returned), each once, first seen first.

    The sources of a run that never said them itself (its process died mid-run), from its saved steps.
    """
    found: dict[str, Source] = {}
    for event in events:
        if isinstance(event, ToolResultEvent | AgentAction | AgentFinished):
            keep_sources(found, event.sources)
    return list(found.values())
