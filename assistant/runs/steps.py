"""A run's steps as saved: the one module that turns an engine event into a step's JSON and back.

``save_event`` gives the JSON a ``Step`` keeps (and a run publishes to its followers), with its
version ``v``; ``load_event`` reads it back into the engine's event class, ``Step.event`` for a saved
step. Nothing else reads a step's raw ``data`` (``tools/check_step_data.py`` fails ``make test``
otherwise).

Versions: ``v`` absent (steps saved before it existed) is version 0, the same fields with ``usage``
and ``arguments`` as plain JSON, which the typed fields read as they are, and no ``cause``: it is read
from the English reason that version wrote (``_cause_of_version_0``, the only place English is read);
a step of version 0 whose data an old deletion emptied keeps its kind and agent in the step's columns. A step that still cannot
be read raises ``UnreadableStep``; ``events_of`` leaves such a step out (logged), so a run's page and
``GET /v1/runs/{id}`` answer with the rest.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, TypeGuard, TypeVar, get_args, get_origin

from django.apps import apps
from django.db import connection
from django.db.models import Field, QuerySet
from pydantic import BaseModel, ValidationError

from assistant.engine.causes import Cause, CauseCode
from assistant.engine.events import EVENT_ADAPTER, Event, event_types

log = logging.getLogger(__name__)

VERSION = 1
EVENT_TYPES: dict[str, type[BaseModel]] = {t.model_fields["kind"].default: t for t in event_types()}


class UnreadableStep(ValueError):
    """A saved step that is no event of any known version."""


class SavedStep(Protocol):
    """What ``load_step`` reads of a ``Step``."""

    kind: str
    agent_id: str
    data: Any


def save_event(event: Event) -> dict[str, Any]:
    """The JSON a step keeps of an event."""
    return {"v": VERSION, **event.model_dump(mode="json")}


def published_text(data: Mapping[str, Any]) -> str | None:
    """The text of a published text delta (``save_event``'s JSON of a ``TextDeltaEvent``, this version) without
    building the event, or None for anything else: a follower reads many of them."""
    if data.get("v") == VERSION and data.get("kind") == "text_delta" and isinstance(data.get("text"), str):
        return str(data["text"])
    return None


def resave(step: SavedStep, event: Event | None) -> bool:
    """Give a step another event (None: no data at all); False when that changes nothing."""
    data = {} if event is None else save_event(event)
    if data == step.data:
        return False
    step.data = data
    return True


def load_event(data: Mapping[str, Any] | Any, kind: str = "", agent_id: str = "") -> Event:
    """An event from its saved JSON; ``kind`` and ``agent_id`` (a step's columns) fill what an old step lacks."""
    if not isinstance(data, Mapping):
        data = {}
    fields = dict(data)
    version = fields.pop("v", 0)
    if version == 0:
        fields = _from_version_0(fields, kind, agent_id)
    elif version != VERSION:
        raise UnreadableStep(f"step version {version!r} is unknown (this code reads up to {VERSION})")
    try:
        return EVENT_ADAPTER.validate_python(fields)
    except ValidationError as e:
        raise UnreadableStep(f"a {fields.get('kind') or 'step'} that is no event: {e.error_count()} error(s)") from e


def _from_version_0(fields: dict[str, Any], kind: str, agent_id: str) -> dict[str, Any]:
    """A step saved before versions: its kind and agent from the columns when its data lost them (emptied by an
    old deletion), and a blank (``""``, ``0``, ``()``) for each field it lacks (a field added since)."""
    if kind:
        fields.setdefault("kind", kind)
    if agent_id:
        fields.setdefault("agent_id", agent_id)
    model = EVENT_TYPES.get(fields.get("kind", ""))
    if model is None:
        return fields
    data_keys = set(fields)
    fields = _filled(model, fields)
    if fields["kind"] == "agent_finished" and "partial_report" not in data_keys:
        fields["partial_report"] = str(fields.get("report", "")).startswith(_V0_PARTIAL_REPORTS)
    if "cause" in model.model_fields and fields.get("cause") is None:
        said = fields.get("reason") if fields["kind"] == "agent_finished" else fields.get("message")
        if fields["kind"] != "agent_finished" or fields.get("status") != "ok" or said:
            cause = _cause_of_version_0(str(said or ""))
            fields["cause"] = cause.model_dump() if cause is not None else None
    return fields


# How the reports version 0's engine wrote for an agent that wrote none began.
_V0_PARTIAL_REPORTS = ("Stopped", "Interrupted (", "Failed: ")
# The English reasons version 0 saved, and the causes they stand for.
_STOPS: dict[str, CauseCode] = {
    "stopped on request": "stopped_by_user",
    "stopped: the category's monthly budget is reached": "category_budget",
    "stopped: the task's cost cap is reached": "cost_cap",
    "stopped: the server executing it was shut down": "server_shutdown",
}
_V0_PATTERNS: tuple[tuple[str, CauseCode], ...] = (
    (r"^call budget reached \((?P<used>[\d,]+)/(?P<limit>[\d,]+) calls\)", "rounds"),
    (r"^token budget (nearly )?reached \((?P<used>[\d,]+)/(?P<limit>[\d,]+) tokens\)", "tokens"),
    (r"^time budget (nearly )?reached \((?P<used>[\d.]+)/(?P<limit>[\d.]+) s\)", "seconds"),
    (r"^time budget reached \((?P<limit>[\d.]+) s\)", "seconds"),
    (r"^time budget reached", "seconds"),
    (r"^output cut at the token cap", "output_cut"),
    (r"^the model call failed|^The model could not answer", "model_error"),
    (r"^its result was invalid twice", "invalid_result"),
    (r"^it returned no result after the forced landing", "no_result"),
    (r"^a tool failed|^A tool failed", "tool_failed"),
    (r"^the run ended before this agent returned", "run_ended"),
)
_V0_REASONS = tuple((re.compile(pattern), code) for pattern, code in _V0_PATTERNS)


def _cause_of_version_0(said: str) -> Cause | None:
    if said in _STOPS:
        return Cause(code=_STOPS[said])
    for pattern, code in _V0_REASONS:
        found = pattern.match(said)
        if found is not None:
            numbers = {k: float(v.replace(",", "")) for k, v in found.groupdict().items() if v}
            return Cause(code=code, used=numbers.get("used"), limit=numbers.get("limit"))
    return None


def _filled(model: type[BaseModel], fields: dict[str, Any]) -> dict[str, Any]:
    out = dict(fields)
    for name, info in model.model_fields.items():
        if info.is_required() and name not in out:
            out[name] = _blank_of(info.annotation)
        elif isinstance(out.get(name), dict) and _is_model(info.annotation):
            out[name] = _filled(info.annotation, out[name])
    return out


def _is_model(annotation: Any) -> TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _blank_of(annotation: Any) -> Any:
    if get_origin(annotation) is Literal:
        return get_args(annotation)[0]
    if _is_model(annotation):
        return _filled(annotation, {})
    origin = get_origin(annotation) or annotation
    blanks: dict[Any, Any] = {str: "", int: 0, float: 0.0, bool: False, tuple: (), list: [], dict: {}}
    return blanks.get(origin)


def load_step(step: SavedStep) -> Event:
    """The engine's event a saved step holds."""
    return load_event(step.data, step.kind, step.agent_id)


class StepWithEvent(Protocol):
    """A ``Step``, as ``with_events`` reads it."""

    @property
    def seq(self) -> int: ...

    @property
    def run_id(self) -> Any: ...

    @property
    def event(self) -> Event: ...


S = TypeVar("S", bound=StepWithEvent)


def with_events(steps: Iterable[S]) -> list[tuple[S, Event]]:
    """Saved steps (each a ``Step``) with their events (``Step.event``), in order; an unreadable one is left out
    and logged."""
    out = []
    for step in steps:
        try:
            out.append((step, step.event))
        except UnreadableStep as e:
            log.warning("step %s of run %s left out: %s", step.seq, step.run_id, e)
    return out


def events_of(steps: Iterable[StepWithEvent]) -> list[Event]:
    """The events of saved steps, in order, the unreadable left out (``with_events``)."""
    return [event for _, event in with_events(steps)]


@dataclass(frozen=True, slots=True)
class AgentEnd:
    """What a forced-landing count needs of one agent that ended (``AgentStarted``'s profile, ``AgentFinished``'s
    model, status and forced landing), read by ``agent_ends`` without loading whole events."""

    run_id: Any
    model: str
    profile: str
    status: str
    forced_landing: bool


def agent_ends(steps: QuerySet[Any]) -> Iterator[AgentEnd]:
    """The agents that ended among ``steps`` (a query of ``Step``), reading in the database only the fields an
    ``AgentEnd`` needs: a month's agents are too many to load every event whole. Both versions keep these fields
    under the same names; a step of version 0 whose data was emptied has none, and counts with a blank model."""
    rows = (
        steps.filter(kind__in=["agent_started", "agent_finished"])
        .order_by("run_id", "seq")
        .values_list(
            "run_id", "kind", "agent_id", "data__model", "data__profile", "data__status", "data__forced_landing"
        )
    )
    profiles: dict[tuple[Any, str], str] = {}
    for run_id, kind, agent_id, model, profile, status, forced in rows:
        if kind == "agent_started":
            profiles[(run_id, agent_id)] = str(profile or "")
        else:
            yield AgentEnd(
                run_id, str(model or ""), profiles.get((run_id, agent_id), ""), str(status or ""), bool(forced)
            )


def agent_calls(steps: QuerySet[Any], model: str) -> dict[tuple[Any, str], list[tuple[int, int]]]:
    """The model calls of the agents among ``steps`` (a query of ``Step``) that ran on ``model``: for each (run, agent),
    each call's prompt and completion tokens in order, reading in the database only those fields (both versions keep
    them under these names)."""
    rows = (
        steps.filter(kind="usage", data__model=model)
        .exclude(agent_id="")
        .order_by("run_id", "seq")
        .values_list("run_id", "agent_id", "data__prompt_tokens", "data__completion_tokens")
    )
    calls: dict[tuple[Any, str], list[tuple[int, int]]] = {}
    for run_id, agent_id, prompt, completion in rows:
        calls.setdefault((run_id, agent_id), []).append((int(prompt or 0), int(completion or 0)))
    return calls


def count_month_agent_ends(
    organisation_id: int,
    start: datetime,
    end: datetime,
    *,
    models: Iterable[str],
    status_in: Iterable[str] = (),
    or_forced_landing: bool = False,
) -> int:
    """How many agents ended in the organisation's runs created from ``start`` to ``end`` (excluded) with one of
    ``models`` and a status in ``status_in`` (or, with ``or_forced_landing``, on their forced landing round), counted
    by the database in one plain statement (SQLite and PostgreSQL): a run's end counts them (``budgets.landings``),
    and the ORM spent more compiling that count than the database running it."""
    models, statuses = list(models), list(status_in)
    if not models or not (statuses or or_forced_landing):
        return 0
    # The models by name: ``models`` imports this module.
    run_model, step_model = apps.get_model("runs", "Run"), apps.get_model("runs", "Step")
    quote = connection.ops.quote_name
    steps, runs = quote(step_model._meta.db_table), quote(run_model._meta.db_table)
    if connection.vendor == "postgresql":
        text = "{steps}.data ->> '{key}'"
        true = "{steps}.data -> '{key}' = 'true'::jsonb"
    else:  # SQLite's JSON1: a JSON string's text; ``true`` is its own type
        text = "json_extract({steps}.data, '$.{key}')"
        true = "json_type({steps}.data, '$.{key}') = 'true'"
    which = []
    if statuses:
        which.append(f"{text.format(steps=steps, key='status')} IN ({', '.join(['%s'] * len(statuses))})")
    if or_forced_landing:
        which.append(true.format(steps=steps, key="forced_landing"))
    created = run_model._meta.get_field("created")
    assert isinstance(created, Field)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM {steps} JOIN {runs} ON {steps}.run_id = {runs}.id"
            f" WHERE {runs}.organisation_id = %s AND {runs}.created >= %s AND {runs}.created < %s"
            f" AND {steps}.kind = %s AND {text.format(steps=steps, key='model')} IN ({', '.join(['%s'] * len(models))})"
            f" AND ({' OR '.join(which)})",
            [
                organisation_id,
                created.get_db_prep_value(start, connection),
                created.get_db_prep_value(end, connection),
                "agent_finished",
                *models,
                *statuses,
            ],
        )
        (count,) = cursor.fetchone()
    return int(count)
