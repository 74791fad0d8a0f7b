"""The typed event stream of a run.

Every thing that happens in a run is one of these events, in order. The Django side persists them
as steps and pushes them to the browser; the API serialises them. Events of a sub-agent carry its
``agent_id``.

Every text or list field of an event (and of the values inside one) is marked ``Erase`` (text a user
wrote, a model or a document produced: emptied when its conversation is deleted, by ``erased``) or
``Keep`` (names, ids, statuses, resources: kept with the numbers). ``unmarked_fields`` lists the
fields without a mark; a test keeps it empty, so a new field cannot escape erasure unnoticed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal, TypeAlias, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, model_validator

from .causes import Cause, ModelErrorKind
from .marks import ERASE, KEEP, Erase, Keep, Name, Text
from .types import Message, Reasoning, ToolCall, UsagePart
from .usage import Impact, ModelUsageData, RunUsage, UsageData

AgentStatus: TypeAlias = Literal["ok", "interrupted", "stopped", "error"]
CostSource: TypeAlias = Literal["reported", "estimated"]
"""Where a model call's cost comes from: the usage its provider reported, or tokens counted locally."""
RunStatus: TypeAlias = Literal["ok", "stopped", "error"]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True)


class Source(_Value):
    """A document or page that was read, by the main model or by an agent."""

    id: Annotated[str, ERASE]
    title: Text
    kind: Annotated[Literal["document", "page"], KEEP] = "document"
    where: Text = ""
    start: int | None = None
    """Where the part of the document that a read returned begins (a character offset in its text)."""
    end: int | None = None
    """Where it ends (exclusive): the page of the document marks ``start:end`` as read."""
    demo_web: bool = False
    """A page of the demo web (fictional, shipped with the assistant, read offline), not of the internet."""


class ChosenDocument(_Value):
    """A document of a base handed to an agent on its own (``doc:<kb>/<id>``), with the title its line shows."""

    id: Name
    kb: Name
    title: Text

    @property
    def resource(self) -> str:
        return f"doc:{self.kb}/{self.id}"


class Action(_Value):
    """What one tool call did, in the words the user reads: a search with its query and count, a read, a query
    (its SQL and row count)."""

    tool: Name
    kind: Annotated[Literal["search", "read", "fetch", "code", "query", "result", "other"], KEEP]
    label: Text
    count: int | None = None
    ok: bool = True
    demo_web: bool = False
    """A search or a read of the demo web (offline, fictional pages), not of the internet."""
    detail: Text = ""
    """The whole of what ``label`` begins, for the page to unfold: ``run_code``'s script."""
    where: Annotated[str, KEEP] = ""
    """The knowledge base a search looked in (its slug, which the page words by the base's name); the query
    alone is ``label``."""
    stopped: Cause | None = None
    """The call was stopped with its run, before it returned: ``run_stopped``, the run's cause in ``because``."""
    started: bool = True
    """False: the call was stopped while it waited for its turn (``Tool.turn``); it never started."""


class Attempt(_Value):
    """A try of a model call that the adapter tried again after it failed (a rate limit, a server error, a timeout,
    a stream broken before its first part): one request sent to the provider, its own ``chat`` span."""

    started_at: float
    """When it was sent, in seconds since the epoch."""
    seconds: float
    error_kind: Annotated[ModelErrorKind, KEEP]


class _Event(_Value):
    agent_id: Annotated[str | None, KEEP] = None


class RoundStarted(_Event):
    kind: Annotated[Literal["round_started"], KEEP] = "round_started"
    round: int
    model: Name
    forced: bool = False
    rounds_left: int | None = None
    """What was left as the round started, this round included (None: a step saved before it was said): an agent's
    rounds, the main loop's rounds with tools."""
    tokens_left: int | None = None
    """An agent's tokens left as the round started (None for the main loop, which has no token budget)."""
    seconds_left: int | None = None
    """Whole seconds left as the round started: an agent's time budget, the main loop's request time."""


class TextDeltaEvent(_Event):
    kind: Annotated[Literal["text_delta"], KEEP] = "text_delta"
    text: Text


class ReasoningEvent(_Event):
    """A reasoning of the model in one round, as a reader may see it: OpenAI's summary of a reasoning item, Mistral's
    thinking. Emitted as it completes, before that round's text and tool calls (a round may have several)."""

    kind: Annotated[Literal["reasoning"], KEEP] = "reasoning"
    round: int
    model: Name
    summary: Text = ""
    """The summary ("" when the provider gave none, or refused it: ``summary_unavailable``)."""
    summary_unavailable: bool = False
    """The provider refused a summary for this key (an organisation OpenAI has not verified): the model reasoned,
    and what it thought is not shown ("Thinking (summary unavailable)")."""

    @classmethod
    def of(cls, reasoning: Reasoning, round: int, model: str, agent_id: str | None = None) -> ReasoningEvent | None:
        """What a round's reasoning shows: its summary, or that the provider refused one; None when it has neither
        (the reasoning still goes back to the model)."""
        if not reasoning.text and not reasoning.summary_unavailable:
            return None
        unavailable = reasoning.summary_unavailable and not reasoning.text
        return cls(agent_id=agent_id, round=round, model=model, summary=reasoning.text, summary_unavailable=unavailable)


class ToolCallEvent(_Event):
    kind: Annotated[Literal["tool_call"], KEEP] = "tool_call"
    call_id: Name
    name: Name
    arguments: Annotated[dict[str, JsonValue], ERASE]
    """The arguments the model wrote, as JSON (``{"raw": text}`` when it wrote no JSON object)."""


class ToolResultEvent(_Event):
    kind: Annotated[Literal["tool_result"], KEEP] = "tool_result"
    call_id: Name
    name: Name
    ok: bool
    action: Action | None = None
    sources: Annotated[tuple[Source, ...], ERASE] = ()
    error: Annotated[str | None, ERASE] = None
    result_chars: int = 0
    """The length of what the model read back (the result's JSON)."""


class AgentStarted(_Event):
    kind: Annotated[Literal["agent_started"], KEEP] = "agent_started"
    agent_id: Name
    instruction: Text
    model: Name
    model_label: Name
    resources: Annotated[tuple[str, ...], KEEP]
    profile: Annotated[str | None, KEEP] = None
    max_rounds: int
    rounds_asked: int | None = None
    """The rounds the main model asked when more than its level allows (it got ``max_rounds``, the level's budget)."""
    documents: Annotated[tuple[ChosenDocument, ...], ERASE] = ()
    """The chosen documents among ``resources`` (its ``doc:`` entries), with their titles."""
    call_id: Name = ""
    """The main model's ``agents`` call that launched it."""
    estimate_eur: float | None = None
    """Its share of its delegation's ``estimate_eur`` (None: a step saved before estimates)."""
    estimate_max_eur: float | None = None
    """Its share of its delegation's ``estimate_max_eur``: the most it can cost within its round budget."""


Decision: TypeAlias = Literal["launched", "refused", "asking", "declined", "unanswered", "stopped"]
"""What became of a delegation once estimated: ``launched``; ``refused`` (over its cap, no one to ask); ``asking`` (over
its cap: the run waits for the user's answer), then ``launched``, ``declined`` (answer without the agents),
``unanswered`` (no answer in time: without them) or ``stopped`` (Stop came while it waited)."""


class DelegationEstimated(_Event):
    """An ``agents`` call's estimate, worked out before its agents launch (``estimate.py``), and what became of it
    (``decision``): a step of its own, and another with the decision when the user was asked."""

    kind: Annotated[Literal["delegation_estimate"], KEEP] = "delegation_estimate"
    call_id: Name
    decision: Annotated[Decision, KEEP]
    estimate_eur: float
    """What it should cost: the agents' first requests and the growth per round of recent agents on their models."""
    estimate_max_eur: float
    """The most it can cost within its agents' round budgets (a bound the budgets enforce)."""
    cap_eur: float | None = None
    """The cap ``estimate_max_eur`` was compared with (the request's or the organisation's), None: none."""
    tasks: int = 0
    """How many agents it would launch."""
    models: Annotated[tuple[str, ...], KEEP] = ()
    """Their models, in the order of the tasks."""
    measured_agents: int = 0
    """How many recent agents of the organisation the growth per round comes from (0: the documented default)."""
    question: Name = ""
    """``asking``: the key the user's answer names (``estimate.Question.key``)."""
    expires_at: float = 0.0
    """``asking``: when the wait ends (seconds since the epoch), then the run answers without the agents."""
    cause: Cause | None = None
    """Why it was not launched: ``delegation_cap`` (``used``: ``estimate_max_eur``, ``limit``: the cap; ``kind``
    ``declined`` or ``unanswered`` when the user was asked)."""


class AgentAction(_Event):
    kind: Annotated[Literal["agent_action"], KEEP] = "agent_action"
    agent_id: Name
    action: Action
    sources: Annotated[tuple[Source, ...], ERASE] = ()
    """What this action read: saved as it happens, so a run whose process dies still knows what its agents read."""
    call_id: Name = ""
    """The tool call it ran ("" for a step of the agent's result, which runs no tool)."""
    started_at: float = 0.0
    """When the tool started, in seconds since the epoch (0: no tool ran, or a step saved before)."""
    seconds: float = 0.0
    result_chars: int = 0
    """The length of what the agent's model read back."""


class AgentFinished(_Event):
    kind: Annotated[Literal["agent_finished"], KEEP] = "agent_finished"
    agent_id: Name
    model: Name
    status: Annotated[AgentStatus, KEEP]
    reason: Name = ""
    """Why, in English (the API's ``reason``, what the main model read); ``cause`` says it as data."""
    cause: Cause | None = None
    """Why it is not ``ok`` (or why an ``ok`` agent landed); None for an agent that simply returned."""
    rounds: int
    seconds: float
    cost_eur: float
    usage: UsageData = UsageData()
    report: Text
    partial_report: bool = False
    """The report is the engine's record of what the agent had done (it wrote none), not the agent's."""
    tools_run: Annotated[tuple[str, ...], KEEP] = ()
    sources: Annotated[tuple[Source, ...], ERASE] = ()
    forced_landing: bool = False


class UsageEvent(_Event):
    kind: Annotated[Literal["usage"], KEEP] = "usage"
    model: Name
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0
    cost_eur: float
    energy_wh: float = 0.0
    carbon_g: float = 0.0
    estimated: bool = False
    """The provider reported no usage (the call was cut): these tokens are an estimate of what was sent and streamed."""
    cost_source: Annotated[CostSource, KEEP] = "reported"
    """``reported``: the usage the provider reported, priced from the catalogue; ``estimated``: some or all of its
    tokens counted locally (a call cut or aborted, or an attempt cut and tried again)."""
    estimated_eur: float = 0.0
    """The part of ``cost_eur`` that was estimated (all of it for a cut call the provider reported nothing of)."""
    started_at: float = 0.0
    """When its last try was sent, in seconds since the epoch (0: a step saved before)."""
    seconds: float = 0.0
    """From then to the call's end."""
    finish_reason: Annotated[str, KEEP] = ""
    """Why the model stopped (``stop``, ``tool_calls``, ``length``; ``cancelled`` by Stop), "" when it failed."""
    api_model: Name = ""
    """The model's name at its provider, as the request sent it ("" in a step saved before)."""
    response_model: Name = ""
    """The model the provider says answered ("" when it said none)."""
    failed: bool = False
    """The call failed after it was sent (billed as cut): its ``ModelCallFailed`` follows."""
    retried: Annotated[tuple[Attempt, ...], KEEP] = ()
    """The tries before the last one, each sent and failed, then tried again."""

    @model_validator(mode="before")
    @classmethod
    def _source_of_older_steps(cls, data: Any) -> Any:
        """A step saved before costs said their source: ``estimated`` says it, and all of an estimated cost is."""
        if isinstance(data, dict) and "cost_source" not in data and data.get("estimated"):
            return {**data, "cost_source": "estimated", "estimated_eur": data.get("cost_eur", 0.0)}
        return data

    @property
    def part(self) -> UsagePart:
        return UsagePart(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens,
            reasoning_tokens=self.reasoning_tokens,
        )

    @property
    def impact(self) -> Impact | None:
        """The call's energy and carbon; None when its model has no carbon data (nothing was estimated)."""
        if not (self.energy_wh or self.carbon_g):
            return None
        return Impact(energy_kwh=self.energy_wh / 1000, carbon_g=self.carbon_g)

    def add_to(self, usage: RunUsage) -> None:
        """Count this call in ``usage``: its tokens, its cost (and the part of it estimated), its energy and carbon."""
        usage.add(
            self.model,
            self.part,
            self.cost_eur,
            self.impact,
            estimated=self.estimated,
            estimated_eur=self.estimated_eur,
        )


class ModelCallFailed(_Event):
    """A model call that failed: refused by the provider (``billed`` false) or cut after it was sent (billed)."""

    kind: Annotated[Literal["model_call_failed"], KEEP] = "model_call_failed"
    model: Name
    error_kind: Annotated[ModelErrorKind, KEEP]
    billed: bool
    status: int | None = None
    """The provider's HTTP status, when it answered with one."""
    retry_after: float | None = None
    """The seconds the provider asked to wait, when it refused the call for too many requests and said so."""
    message: Text = ""
    """The provider's message (it may quote the request): erased with its conversation."""
    api_model: Name = ""
    """The model's name at its provider, as the request sent it ("" in a step saved before)."""
    started_at: float = 0.0
    """When its last try was sent, in seconds since the epoch (0: a step saved before)."""
    seconds: float = 0.0
    retried: Annotated[tuple[Attempt, ...], KEEP] = ()
    """The tries before the last one, each sent and failed, then tried again."""


class FinalEvent(_Event):
    kind: Annotated[Literal["final"], KEEP] = "final"
    text: Text
    rounds: int
    sources: Annotated[tuple[Source, ...], ERASE] = ()
    usage: UsageData = UsageData()
    cut: bool = False
    """The answer's last call stopped at its output cap (the model's, or the API client's ``max_tokens``)."""
    tool_calls: Annotated[tuple[ToolCall, ...], ERASE] = ()
    """The API client's tools that the main model called in its last round, for the client to run (the turn ends on
    them; the ids are the model's): empty for an answer."""
    messages: Annotated[tuple[Message, ...], ERASE] = ()
    """With ``tool_calls``: the main model's messages after its system prompt as its next call would continue them
    (the conversation, the question, each round's calls and results, the server's tools of the last round run),
    from which the client's follow-up with the results continues (``runs.client_turns``)."""


class ErrorEvent(_Event):
    kind: Annotated[Literal["error"], KEEP] = "error"
    message: Text
    cause: Cause | None = None


class StoppedEvent(_Event):
    kind: Annotated[Literal["stopped"], KEEP] = "stopped"
    message: Name
    cause: Cause | None = None
    text: Text
    rounds: int
    sources: Annotated[tuple[Source, ...], ERASE] = ()
    usage: UsageData = UsageData()


Event: TypeAlias = Annotated[
    RoundStarted
    | TextDeltaEvent
    | ReasoningEvent
    | ToolCallEvent
    | ToolResultEvent
    | DelegationEstimated
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


def usage_from(events: Iterable[Event]) -> RunUsage:
    """The usage the usage events say, each model call (agents' included) once, and the failed calls."""
    usage = RunUsage()
    for event in events:
        if isinstance(event, UsageEvent):
            event.add_to(usage)
        elif isinstance(event, ModelCallFailed):
            usage.failed(event.model)
    return usage


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


# Erasure ------------------------------------------------------------------------------------------

V = TypeVar("V", bound=BaseModel)
# The values inside events whose fields carry marks too (walked by ``erased`` and ``unmarked_fields``).
VALUES: tuple[type[BaseModel], ...] = (Source, Action, Attempt, UsageData, ModelUsageData, Cause)
_UNMARKED_OK = (int, float, bool, type(None))


def _mark(model: type[BaseModel], name: str) -> Erase | Keep | None:
    found = [m for m in model.model_fields[name].metadata if isinstance(m, Erase | Keep)]
    return found[0] if found else None


def _blank(value: Any) -> Any:
    if isinstance(value, str):
        return ""
    if isinstance(value, tuple):
        return ()
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {}
    return value  # None stays None


def _erased_value(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return erased(value)
    if isinstance(value, tuple):
        return tuple(_erased_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _erased_value(v) for k, v in value.items()}
    return value


def erased(value: V) -> V:
    """An event (or a value inside one) with every field marked ``Erase`` emptied, its shape kept."""
    update = {}
    for name in type(value).model_fields:
        current = getattr(value, name)
        new = _blank(current) if isinstance(_mark(type(value), name), Erase) else _erased_value(current)
        if new is not current:
            update[name] = new
    return value.model_copy(update=update) if update else value


def _needs_mark(annotation: Any) -> bool:
    """Whether a field of this type can hold text: anything but numbers, booleans, None and marked values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return False
    args = get_args(annotation)
    if get_origin(annotation) is not None and get_origin(annotation) is not Literal and args:
        if get_origin(annotation) in (tuple, list, dict):
            return True
        return any(_needs_mark(a) for a in args)  # a union
    return not (isinstance(annotation, type) and issubclass(annotation, _UNMARKED_OK))


def event_types() -> tuple[type[BaseModel], ...]:
    return get_args(get_args(Event)[0])


def unmarked_fields(models: Iterable[type[BaseModel]] | None = None) -> list[str]:
    """The text or list fields without an ``Erase``/``Keep`` mark, as ``Class.field`` (empty: every one has one)."""
    if models is None:
        models = (*event_types(), *VALUES)
    return [
        f"{model.__name__}.{name}"
        for model in models
        for name, info in model.model_fields.items()
        if _mark(model, name) is None and _needs_mark(info.annotation)
    ]
