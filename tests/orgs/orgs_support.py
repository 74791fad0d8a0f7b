"""Two organisations: the demo one (admin ``demo``, member ``mia``) and another one (admin ``mallory``).

The other organisation has a knowledge base with the same slug as one of the demo's (``factures``)
and one of its own (``secrets``), so that a slip in any filter would show.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from assistant.catalogue import snapshot
from assistant.catalogue.models import CatalogueEntry
from assistant.engine.events import Event
from assistant.engine.loop import RunOutcome, run_chat
from assistant.engine.models.function import CallInfo, FunctionModel, ModelFunction
from assistant.engine.notes import without_note
from assistant.engine.policy import DEFAULT_LEVELS, LEVELS, Level, RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.types import Message, ModelRequest, ModelResponse, ToolCall
from assistant.knowledge.models import Document, KnowledgeBase
from assistant.orgs.models import AgentProfile, Membership, Organisation
from assistant.orgs.services import policy_for
from assistant.runs import execution

# What the other organisation's documents say; a run of the demo must never see it.
SECRET = "OBSIDIAN-42"


@dataclass
class World:
    demo: Organisation
    other: Organisation
    admin: User
    member: User
    mallory: User
    other_docs: list[Document]
    other_profile: AgentProfile


def _user(name: str) -> User:
    return get_user_model().objects.create_user(name, password=f"{name}-password")


def build_world() -> World:
    call_command("load_demo", verbosity=0)
    demo = Organisation.objects.get(slug="demo")
    # The settings and enforcement tests start from an organisation without agent profiles: load_demo's
    # Vérificateur (the demo's checking profile) is left out here.
    demo.agent_profiles.all().delete()
    member = _user("mia")
    Membership.objects.create(organisation=demo, user=member, role="member")
    other = Organisation.objects.create(name="Other Company", slug="other")
    mallory = _user("mallory")
    Membership.objects.create(organisation=other, user=mallory, role="admin")
    docs = []
    for slug, title in (("factures", "Invoice O-1 — Bimbamjob"), ("secrets", "Secret plan")):
        kb = KnowledgeBase.objects.create(organisation=other, slug=slug, name=slug.capitalize())
        docs.append(
            Document.objects.create(
                knowledge_base=kb,
                title=title,
                text=f"Zanzibar payroll, Bimbamjob invoices 2024 payments: codeword {SECRET}.",
            )
        )
    profile = AgentProfile.objects.create(organisation=other, name="other-checker", instructions="Check.", tools=["kb"])
    return World(demo, other, get_user_model().objects.get(username="demo"), member, mallory, docs, profile)


def signed_in(username: str, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    assert client.login(username=username, password="demo-password" if username == "demo" else f"{username}-password")
    return client


def levels_post(**changes: Any) -> dict[str, Any]:
    """The levels form as the page posts it, with the defaults, then ``changes`` (``approfondi__agent_rounds=2``)."""
    data: dict[str, Any] = {"parallel-max_parallel_agents": 4}
    for lv in LEVELS:
        d = DEFAULT_LEVELS[lv]
        data |= {
            f"{lv}-effort": d.effort or "",
            f"{lv}-main_rounds": d.main_rounds,
            f"{lv}-agent_rounds": d.agent_rounds,
        }
    for key, value in changes.items():
        data[key.replace("__", "-")] = value
    return data


# Runs with scripted models, through the organisation's real policy and knowledge ------------------


def catalogue_entry(model_id: str, input_price: float, output_price: float) -> None:
    """A catalogue row offered to users (its provider, Mistral, needs a key in the settings)."""
    CatalogueEntry.objects.create(
        model_id=model_id,
        provider="mistral",
        api_model=model_id,
        display_name=model_id.title(),
        input_price=Decimal(str(input_price)),
        cached_input_price=Decimal(str(input_price / 4)),
        output_price=Decimal(str(output_price)),
        price_date=date(2026, 1, 1),
        price_source="test",
        context_window=32_000,
        output_cap=4_096,
    )


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"call_{name}_{next(_ids)}", name=name, arguments=json.dumps(arguments))


_ids = itertools.count(1)


def tool_payloads(request: ModelRequest, name: str) -> list[Any]:
    return [json.loads(without_note(m.content)) for m in request.messages if m.role == "tool" and m.name == name]


def scripted(*steps: ModelResponse | Callable[[ModelRequest], ModelResponse]) -> ModelFunction:
    """A model function replaying ``steps``, one per call."""

    def function(request: ModelRequest, info: CallInfo) -> ModelResponse:
        assert info.index < len(steps), f"unexpected model call #{info.index + 1}"
        step = steps[info.index]
        return step(request) if callable(step) else step

    return function


@dataclass
class ScriptedRun:
    """A run of an organisation with scripted models in place of the catalogue's."""

    outcome: RunOutcome
    models: dict[str, FunctionModel]
    events: list[Event] = field(default_factory=list)

    def requests(self, model_id: str) -> list[ModelRequest]:
        return self.models[model_id].requests


async def run_scripted(
    org: Organisation,
    functions: dict[str, ModelFunction],
    *,
    model: str = "demo-large",
    level: Level | None = "approfondi",
    resources: tuple[str, ...] = ("kb:factures", "agents"),
    text: str = "Bimbamjob invoices 2024",
) -> ScriptedRun:
    """``run_chat`` with the organisation's policy and toolbox, exactly as ``execute_run`` builds them."""
    catalogue = await sync_to_async(snapshot.catalogue)()
    models = {m: FunctionModel(fn, catalogue[m]) for m, fn in functions.items()}
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    ctx = RunContext(
        catalogue=catalogue,
        models=lambda model_id: models[model_id],
        toolbox=await execution.run_toolbox(org.pk),
        policy=await sync_to_async(policy_for)(org),
        emit=emit,
    )
    request = RunRequest(messages=(Message.user(text),), model=model, level=level, resources=resources)
    outcome = await run_chat(request, ctx)
    return ScriptedRun(outcome, models, events)
