"""A run's start: everything a run executes from, as one typed object built once.

Intake builds it as it saves the run (``intake.create_run`` returns it), from what it has just checked: the run as
saved, its request (the conversation so far and the question, with the model, level and resources) planned once
against the policy, the policy, its category's ledger holding the admission's reservation, a scheduled task's cost cap,
the reader's language. The caller hands it to ``execution.launch``, which hands it to the executor
as an argument. A worker that executes a run another process saved (``RUNS_EXECUTOR=celery``) rebuilds the same
object from the database with the same function (``read_start`` reads the inputs, ``start_of`` builds it).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import F, Q, QuerySet
from pydantic import TypeAdapter

from assistant.catalogue import snapshot
from assistant.engine.policy import LEVELS, Plan, Policy, RunRequest, plan_request
from assistant.engine.types import ClientTools, Sampling
from assistant.engine.types import Message as EngineMessage
from assistant.engine.usage import CostCap, Ledgers, UsageLedger
from assistant.orgs.services import policy_for

from . import accounting
from .models import Message, Run


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStart:
    """What a run executes from (``start_of``)."""

    run: Run
    """The run as saved (its organisation, key and conversation loaded)."""
    request: RunRequest
    """The conversation so far (ending with the run's question) and the run's model, level and resources."""
    plan: Plan
    """``request`` checked against ``policy``: what the run may do."""
    policy: Policy
    ledger: UsageLedger | None
    """Its category's ledger (holding the admission's reservation for its first call)."""
    cost_cap_eur: float | None
    """A scheduled task's cap on what the run may cost; None: none."""
    language: str
    """The reader's language, given to every model request of the run."""

    @property
    def asks_the_user(self) -> bool:
        """Whether someone follows the run to answer a question (a delegation over its cap): a chat's run, not an API
        request's nor a scheduled task's (the only runs with a cost cap)."""
        return self.run.api_key_id is None and self.cost_cap_eur is None

    @property
    def capped_ledger(self) -> UsageLedger | None:
        """The ledger the run's calls reserve on: its category's, with its cost cap checked first."""
        if self.cost_cap_eur is None:
            return self.ledger
        cap = CostCap(self.cost_cap_eur)
        return cap if self.ledger is None else Ledgers(cap, self.ledger)


def start_of(
    run: Run,
    *,
    policy: Policy,
    ledger: UsageLedger | None,
    request: RunRequest,
    plan: Plan | None = None,
    cost_cap_eur: float | None = None,
) -> RunStart:
    """A run's start: ``request`` planned against ``policy`` (unless intake has just planned it: ``plan``), the
    Raises ``RequestRefused`` as ``plan_request`` does."""
    return RunStart(
        run=run,
        request=request,
        plan=plan or plan_request(request, snapshot.catalogue(), policy),
        policy=policy,
        ledger=ledger,
        cost_cap_eur=cost_cap_eur,
        language=run.language or settings.LANGUAGE_CODE,
    )


def read_start(run_id: uuid.UUID, cost_cap_eur: float | None = None) -> RunStart | None:
    """A saved run's start, read from the database (a worker's): None when it is not running. Raises
    ``RequestRefused`` when its request no longer passes the policy, as ``start_of`` does."""
    run = (
        Run.objects.select_related("organisation", "api_key", "conversation__user")
        .filter(pk=run_id, status=Run.Status.RUNNING)
        .first()
    )
    if run is None:
        return None
    ledger = accounting.accounting().ledger(run.organisation_id, run.category, run_id)
    policy = policy_for(run.organisation, run.api_key)
    return start_of(
        run, policy=policy, ledger=ledger, request=request_of(run, history_of(run)), cost_cap_eur=cost_cap_eur
    )


def request_of(run: Run, history: Sequence[EngineMessage]) -> RunRequest:
    """The run's request: its ``history`` (ending with its question) with its model, level and resources."""
    level = run.level if run.level in LEVELS else None
    return RunRequest(
        messages=tuple(history),
        model=run.model,
        level=level,
        resources=tuple(run.resources),
        sampling=Sampling.of(run.sampling),
        client_tools=ClientTools.of(run.client_tools),
        max_delegation_eur=run.max_delegation_eur,
    )


_MESSAGES: TypeAdapter[tuple[EngineMessage, ...]] = TypeAdapter(tuple[EngineMessage, ...])


def prompt_json(messages: Sequence[EngineMessage]) -> list[Any]:
    """The main model's messages as a run keeps them (``Run.prompt``; ``prompt_of`` reads them back)."""
    return list(_MESSAGES.dump_python(tuple(messages), mode="json"))


def prompt_of(data: Any) -> tuple[EngineMessage, ...]:
    """A run's kept messages (``prompt_json``)."""
    return _MESSAGES.validate_python(data)


def turns(conversation_id: int, run: Run | None = None) -> QuerySet[Message]:
    """A conversation's messages as the main model reads them, in order: first those saved with no run (an API
    client's earlier messages and system prompt, saved with the conversation), then each turn's in the order their
    runs started (a queued message's text was saved before the answer it waited for); superseded turns (edited or
    regenerated) and queued messages left out. With ``run``: the turns before it, then its own user message."""
    current = Q(run__replaced_by__isnull=True)
    if run is not None:
        current = (current & Q(run__created__lt=run.created)) | Q(run_id=run.pk, role="user")
    return (
        Message.objects.filter(conversation_id=conversation_id, queued=False)
        .filter(Q(run__isnull=True) | current)
        .order_by(F("run__created").asc(nulls_first=True), "pk")
    )


def as_engine_message(role: str, content: str) -> EngineMessage:
    return EngineMessage(role="user" if role == "user" else "assistant", content=content)


def history_of(run: Run) -> tuple[EngineMessage, ...]:
    """The conversation up to this run's user message, as the main model reads it (``turns``), in one query; a run
    that keeps its messages (``Run.prompt``: an API request with tool calls) reads them instead."""
    if run.prompt:
        return prompt_of(run.prompt)
    rows = turns(run.conversation_id, run).values_list("run_id", "role", "content")
    out: list[EngineMessage] = []
    request: list[str] = []
    for run_id, role, content in rows:
        if run_id == run.pk and role == "user":
            request.append(content)
        elif content.strip():
            out.append(as_engine_message(role, content))
    if len(request) != 1:
        raise (Message.DoesNotExist if not request else Message.MultipleObjectsReturned)(
            f"run {run.pk} has {len(request)} user messages"
        )
    return (*out, EngineMessage.user(request[0]))
