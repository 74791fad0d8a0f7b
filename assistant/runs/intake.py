"""Intake: what a user asks, checked before any model call, then saved as a running run.

The page, the API and scheduled tasks all go through ``check``, the one request check (the message,
the policy, the resources, the organisation's knowledge bases and connectors: it plans the request) and
``create_run`` (``check``, the first request against the main model's window, then the category's budget through
``accounting``: the run's first call is reserved there, before any response starts, and handed to that call),
which returns the run's start (``start.RunStart``): what it executes from, handed to ``execution.launch``. A
refusal is
``RequestRefused`` carrying an ``engine.refusals.Refusal`` (a code and its parameters); each caller words it
for its reader (``wording.refusal_text``), the API with its stable code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ParamSpec

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from assistant.catalogue import snapshot
from assistant.connectors import directory as connectors
from assistant.engine.errors import RequestRefused
from assistant.engine.loop import first_request
from assistant.engine.policy import LEVELS, Level, Plan, Policy, RunRequest, plan_request
from assistant.engine.refusals import Refusal
from assistant.engine.runtime import RunContext
from assistant.engine.scope import KB_PREFIX, MCP_PREFIX
from assistant.engine.tokens import prompt_tokens
from assistant.engine.types import ClientTools, Sampling
from assistant.engine.types import Message as EngineMessage
from assistant.knowledge.chosen import refused_document
from assistant.knowledge.models import KnowledgeBase
from assistant.knowledge.tools import available_resources
from assistant.orgs.models import ApiKey, Organisation
from assistant.orgs.services import policy_for
from assistant.telemetry import setup as telemetry

from . import accounting, execution, start
from .models import Conversation, Message, Run
from .start import RunStart, as_engine_message

# The levels' names are the product's words, the same in every language.
LEVEL_LABELS: dict[str, str] = {
    "rapide": "Rapide",
    "standard": "Standard",
    "approfondi": "Approfondi",
    "maximal": "Maximal",
}


@dataclass(frozen=True, slots=True)
class Ask:
    """What the user asks: the text, the model, the reasoning level and the resources."""

    text: str
    model: str
    level: Level | None
    resources: tuple[str, ...]
    category: str = ""
    """The task category's slug; empty for the organisation's default."""
    language: str = ""
    """The asker's interface language (the page's active language, the API's Accept-Language); empty: the site's."""
    sampling: Sampling | None = None
    """An API client's output cap, sampling and answer format for the main model."""
    client_tools: ClientTools | None = None
    """An API client's function tools for the main model."""


def check(org: Organisation, ask: Ask, api_key: ApiKey | None = None, *, policy: Policy | None = None) -> Plan:
    """Refuse, before any model call, what the policy, the server or the organisation's knowledge bases and
    connectors forbid: raises ``RequestRefused`` with the first refusal, in the order a user can act on them; else
    the request's plan (what its run may do: it depends on the question's choices, not on the conversation before).
    ``policy``: the organisation's (``policy_for``), when the caller has it already."""
    if not ask.text.strip():
        raise RequestRefused(Refusal(code="empty_message"))
    if len(ask.text) > settings.CHAT_MAX_MESSAGE_CHARS:  # first: nothing else is worth checking for it
        raise RequestRefused(
            Refusal(code="message_too_long", used=len(ask.text), limit=settings.CHAT_MAX_MESSAGE_CHARS)
        )
    if ask.level is not None and ask.level not in LEVELS:
        raise RequestRefused(Refusal(code="unknown_level", level=ask.level))
    request = RunRequest(
        messages=(EngineMessage.user(ask.text),), model=ask.model, level=ask.level, resources=ask.resources
    )
    plan = plan_request(request, snapshot.catalogue(), policy or policy_for(org, api_key))  # model, resources, agents
    wanted = [r for r in ask.resources if r.startswith(KB_PREFIX)]
    slugs = [r[len(KB_PREFIX) :] for r in wanted]
    known = set(KnowledgeBase.objects.filter(organisation=org, slug__in=slugs).values_list("slug", flat=True))
    for resource, slug in zip(wanted, slugs, strict=True):
        if slug not in known:
            raise RequestRefused(Refusal(code="knowledge_base_not_found", resource=resource))
    document = refused_document(org.pk, ask.resources)
    if document is not None:
        raise RequestRefused(Refusal(code=document.code, resource=document.resource))
    available = available_resources()
    for resource in ("web", "code"):
        if resource in ask.resources and not available[resource]:
            raise RequestRefused(Refusal(code="resource_unavailable", resource=resource))
    connector = (
        connectors.unknown(org.pk, ask.resources) if any(r.startswith(MCP_PREFIX) for r in ask.resources) else None
    )
    if connector is not None:
        raise RequestRefused(Refusal(code="connector_not_found", resource=MCP_PREFIX + connector))
    return plan


class Busy(Exception):
    """The conversation already has a running run: only one runs at a time in a conversation."""


def history_before(
    conversation: Conversation | None, ask: Ask, earlier: Sequence[tuple[str, str]] = (), replaces: Run | None = None
) -> tuple[EngineMessage, ...]:
    """The conversation as the new run will read it (``start.history_of`` once it is saved), read before it is: a new
    conversation's ``earlier`` messages (``(role, content)``, an API client's), or the conversation's current turns
    less the one the run ``replaces``; then the question."""
    prior = [as_engine_message(r, c) for r, c in earlier if c.strip()]
    if conversation is not None:
        rows = start.turns(conversation.pk).values_list("run_id", "role", "content")
        replaced = replaces.pk if replaces is not None else None
        prior += [
            as_engine_message(r, c) for run_id, r, c in rows if c.strip() and (replaced is None or run_id != replaced)
        ]
    return (*prior, EngineMessage.user(ask.text))


def first_call_tokens(org: Organisation, request: RunRequest, plan: Plan, policy: Policy) -> int:
    """What the run's first model call will reserve: its request as the first round sends it (the conversation so
    far and the question, the system prompt, the tool specs) plus the output cap. Raises ``ContextTooLong`` when
    that request cannot fit the main model's window, even with the oldest turns left out."""
    catalogue = snapshot.catalogue()
    ctx = RunContext(catalogue=catalogue, models=snapshot.resolve, toolbox=execution.toolbox_for(org.pk), policy=policy)
    first = first_request(request, plan, ctx)
    return prompt_tokens(first) + (first.max_output_tokens or catalogue[request.model].output_cap)


P = ParamSpec("P")


def _counted(create: Callable[P, RunStart]) -> Callable[P, RunStart]:
    """Count the refusals met as a run is created, by code (``assistant.refusals``: the category budget's among them)."""

    @functools.wraps(create)
    def counted(*args: P.args, **kwargs: P.kwargs) -> RunStart:
        try:
            return create(*args, **kwargs)
        except RequestRefused as e:
            telemetry.count_refusal(e.refusal.code)
            raise

    return counted


@_counted
def create_run(
    user: User,
    org: Organisation,
    conversation: Conversation | None,
    ask: Ask,
    api_key: ApiKey | None = None,
    *,
    queued: Message | None = None,
    replaces: Run | None = None,
    policy: Policy | None = None,
    earlier: Sequence[tuple[str, str]] = (),
    prompt: Sequence[EngineMessage] | None = None,
    cost_cap_eur: float | None = None,
) -> RunStart:
    """Check the request and admit it against its category's budget, then save the user's message (or give the
    ``queued`` one its run) and a running run, together with the reservation of its first call (refused: nothing is
    saved); ``replaces`` is the turn this run supersedes (an edit or a regeneration); ``policy``: the organisation's
    (``policy_for``) when the caller has it. Raises ``Busy`` when the conversation has a running run (the database's
    constraint decides). Without a ``conversation`` a new one is saved with the run, ``earlier``'s messages
    (``(role, content)``, the API's client's) in it before the user's, in the same transaction. ``prompt``: the main
    model's messages when the conversation's text does not say them (an API request with tool calls and results, or
    one continuing a run that ended on them: ``runs.client_turns``), kept with the run.

    Returns the run's start (``start.RunStart``: the run, its request planned once, the policy, its category's ledger
    holding the reservation, ``cost_cap_eur``, its language), for ``execution.launch``."""
    if earlier and conversation is not None:
        raise ValueError("earlier messages go into a new conversation only")
    policy = policy or policy_for(org, api_key)  # read once for the check and the first call's reservation
    plan = check(org, ask, api_key, policy=policy)
    books = accounting.accounting()
    admission = books.admit(org, ask.category, ask.text, ask.model, user_id=user.pk, api_key=api_key)
    if prompt is not None and conversation is not None:
        raise ValueError("a prompt goes into a new conversation only")
    request = RunRequest(
        messages=tuple(prompt) if prompt is not None else history_before(conversation, ask, earlier, replaces),
        model=ask.model,
        level=ask.level,
        resources=ask.resources,
        sampling=ask.sampling,
        client_tools=ask.client_tools,
    )
    tokens = first_call_tokens(org, request, plan, policy)
    new = conversation is None
    try:
        with transaction.atomic():
            if conversation is None:
                conversation = Conversation.objects.create(organisation=org, user=user, title=ask.text[:80])
                # In one statement: a conversation saved just now cannot be deleted yet, and the user's message
                # below indexes it for the search (what each message's receivers would do).
                Message.objects.bulk_create(
                    [Message(conversation=conversation, role=role, content=content) for role, content in earlier]
                )
            run = Run.objects.create(
                conversation=conversation,
                organisation=org,
                user=user,
                model=ask.model,
                level=ask.level or "",
                resources=list(ask.resources),
                category=admission.category,
                api_key=api_key,
                language=ask.language,
                sampling=ask.sampling.as_json() if ask.sampling is not None else {},
                client_tools=ask.client_tools.as_json() if ask.client_tools is not None else {},
                prompt=start.prompt_json(prompt) if prompt is not None else [],
            )
            if queued is not None:
                Message.objects.filter(pk=queued.pk).update(queued=False, run=run, queue_error="")
            else:
                Message.objects.create(conversation=conversation, role="user", content=ask.text, run=run)
            if replaces is not None:
                # Every earlier version of the turn points at its latest one.
                Run.objects.filter(replaced_by=replaces).update(replaced_by=run)
                Run.objects.filter(pk=replaces.pk).update(replaced_by=run)
            if not new:  # a conversation saved just now is as recent as it gets
                conversation.save(update_fields=["updated"])
            admission = books.reserve(org.pk, admission, run.pk, tokens)
    except IntegrityError as e:
        if not new and Run.objects.filter(conversation=conversation, status=Run.Status.RUNNING).exists():
            raise Busy() from e
        raise
    ledger = books.ledger(org.pk, admission.category, run.pk, admission)
    return start.start_of(run, policy=policy, ledger=ledger, request=request, plan=plan, cost_cap_eur=cost_cap_eur)


def choices_of(ask: Ask) -> dict[str, object]:
    return {
        "model": ask.model,
        "level": ask.level or "",
        "resources": list(ask.resources),
        "category": ask.category,
        "language": ask.language,
    }


def ask_of(message: Message) -> Ask:
    """What a queued message asks, with the choices it was written with."""
    c = message.choices or {}
    level = c.get("level") or None
    return Ask(
        text=message.content,
        model=str(c.get("model", "")),
        level=level if level in LEVELS else None,
        resources=tuple(str(r) for r in c.get("resources", [])),
        category=str(c.get("category", "")),
        language=str(c.get("language", "")),
    )


def enqueue(conversation: Conversation, ask: Ask) -> Message:
    """Keep a message for when the conversation's running run ends (checked now, admitted when it is sent)."""
    return Message.objects.create(
        conversation=conversation, role="user", content=ask.text, queued=True, choices=choices_of(ask)
    )


def submit(user: User, org: Organisation, conversation: Conversation | None, ask: Ask) -> RunStart | Message:
    """A new message from the page: a running run's start, or, while the conversation has one (or messages wait
    before it), a queued message. Checked either way, once (``create_run`` checks before it saves), so a queued message is
    one that can be sent; the organisation's policy is read once for both."""
    policy = policy_for(org)
    if conversation is not None and (
        Message.objects.filter(conversation=conversation, queued=True, queue_error="").exists()
        or Run.objects.filter(conversation=conversation, status=Run.Status.RUNNING).exists()
    ):
        check(org, ask, policy=policy)
        return enqueue(conversation, ask)
    try:
        return create_run(user, org, conversation, ask, policy=policy)
    except Busy:  # raised after its check: the message can be sent
        assert conversation is not None
        return enqueue(conversation, ask)
