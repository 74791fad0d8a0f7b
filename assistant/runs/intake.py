"""Intake: what a user asks, checked before any model call, then saved as a running run.

The page, the API and scheduled tasks all go through ``check``, the one request check (the message,
the policy, the resources, the organisation's knowledge bases and connectors) and ``create_run`` (``check``,
the first request against the main model's window, then the category's budget through ``accounting``: the
run's first call is reserved there, before any response starts, and handed to that call). A refusal is
``RequestRefused`` carrying an ``engine.refusals.Refusal`` (a code and its parameters); each caller words it
for its reader (``wording.refusal_text``), the API with its stable code.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction

from assistant.catalogue import snapshot
from assistant.connectors import directory as connectors
from assistant.engine.errors import RequestRefused
from assistant.engine.loop import first_request
from assistant.engine.policy import LEVELS, Level, RunRequest, plan_request
from assistant.engine.refusals import Refusal
from assistant.engine.runtime import RunContext
from assistant.engine.scope import KB_PREFIX, MCP_PREFIX
from assistant.engine.tokens import prompt_tokens
from assistant.engine.types import Message as EngineMessage
from assistant.knowledge.models import KnowledgeBase
from assistant.knowledge.tools import available_resources
from assistant.orgs.models import ApiKey, Organisation
from assistant.orgs.services import policy_for

from . import accounting, execution
from .models import Conversation, Message, Run

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


def check(org: Organisation, ask: Ask, api_key: ApiKey | None = None) -> None:
    """Refuse, before any model call, what the policy, the server or the organisation's knowledge bases and
    connectors forbid: raises ``RequestRefused`` with the first refusal, in the order a user can act on them."""
    if not ask.text.strip():
        raise RequestRefused(Refusal(code="empty_message"))
    if ask.level is not None and ask.level not in LEVELS:
        raise RequestRefused(Refusal(code="unknown_level", level=ask.level))
    request = RunRequest(
        messages=(EngineMessage.user(ask.text),), model=ask.model, level=ask.level, resources=ask.resources
    )
    plan_request(request, snapshot.catalogue(), policy_for(org, api_key))  # model, resources, agents
    wanted = [r for r in ask.resources if r.startswith(KB_PREFIX)]
    slugs = [r[len(KB_PREFIX) :] for r in wanted]
    known = set(KnowledgeBase.objects.filter(organisation=org, slug__in=slugs).values_list("slug", flat=True))
    for resource, slug in zip(wanted, slugs, strict=True):
        if slug not in known:
            raise RequestRefused(Refusal(code="knowledge_base_not_found", resource=resource))
    available = available_resources()
    for resource in ("web", "code"):
        if resource in ask.resources and not available[resource]:
            raise RequestRefused(Refusal(code="resource_unavailable", resource=resource))
    connector = connectors.unknown(org.pk, ask.resources)
    if connector is not None:
        raise RequestRefused(Refusal(code="connector_not_found", resource=MCP_PREFIX + connector))


def first_call_tokens(
    org: Organisation, conversation: Conversation | None, ask: Ask, api_key: ApiKey | None = None
) -> int:
    """What the run's first model call will reserve: its request as the first round sends it (the conversation so
    far and the question, the system prompt, the tool specs) plus the output cap. Raises ``ContextTooLong`` when
    that request cannot fit the main model's window, even with the oldest turns left out."""
    prior: list[EngineMessage] = []
    if conversation is not None:
        for m in Message.objects.filter(conversation=conversation).order_by("pk"):
            if m.content.strip():
                prior.append(EngineMessage(role="user" if m.role == "user" else "assistant", content=m.content))
    request = RunRequest(
        messages=(*prior, EngineMessage.user(ask.text)), model=ask.model, level=ask.level, resources=ask.resources
    )
    catalogue = snapshot.catalogue()
    ctx = RunContext(
        catalogue=catalogue,
        models=snapshot.resolve,
        toolbox=execution.toolbox_for(org.pk),
        policy=policy_for(org, api_key),
    )
    first = first_request(request, ctx)
    return prompt_tokens(first) + (first.max_output_tokens or catalogue[ask.model].output_cap)


def create_run(
    user: User,
    org: Organisation,
    conversation: Conversation | None,
    ask: Ask,
    api_key: ApiKey | None = None,
) -> Run:
    """Check the request and admit it against its category's budget, then save the user's message and a running
    run, together with the reservation of its first call (refused: nothing is saved)."""
    check(org, ask, api_key)
    books = accounting.accounting()
    category = books.admit(org, ask.category, ask.text, ask.model)
    tokens = first_call_tokens(org, conversation, ask, api_key)
    with transaction.atomic():
        if conversation is None:
            conversation = Conversation.objects.create(organisation=org, user=user, title=ask.text[:80])
        run = Run.objects.create(
            conversation=conversation,
            organisation=org,
            user=user,
            model=ask.model,
            level=ask.level or "",
            resources=list(ask.resources),
            category=category,
            api_key=api_key,
        )
        Message.objects.create(conversation=conversation, role="user", content=ask.text, run=run)
        conversation.save(update_fields=["updated"])
        books.reserve(org.pk, category, run.pk, tokens)
    return run
