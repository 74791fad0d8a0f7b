"""Two organisations: the demo one (admin ``demo``, member ``mia``) and another one (admin ``mallory``).

The other organisation has a knowledge base with the same slug as one of the demo's (``factures``)
and one of its own (``secrets``), so that a slip in any filter would show.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser
from django.core.management import call_command
from django.test import Client

from assistant.knowledge.models import Document, KnowledgeBase
from assistant.orgs.models import AgentProfile, Membership, Organisation

SECRET = "Zanzibar payroll"


@dataclass
class World:
    demo: Organisation
    other: Organisation
    admin: AbstractUser
    member: AbstractUser
    mallory: AbstractUser
    other_docs: list[Document]
    other_profile: AgentProfile


def _user(name: str) -> AbstractUser:
    return get_user_model().objects.create_user(name, password=f"{name}-password")  # type: ignore[no-any-return]


def build_world() -> World:
    call_command("load_demo", verbosity=0)
    demo = Organisation.objects.get(slug="demo")
    member = _user("mia")
    Membership.objects.create(organisation=demo, user=member, role="member")
    other = Organisation.objects.create(name="Other Company", slug="other")
    mallory = _user("mallory")
    Membership.objects.create(organisation=other, user=mallory, role="admin")
    docs = []
    for slug, title in (("factures", "Invoice O-1 — Bimbamjob"), ("secrets", "Secret plan")):
        kb = KnowledgeBase.objects.create(organisation=other, slug=slug, name=slug.capitalize())
        docs.append(
            Document.objects.create(knowledge_base=kb, title=title, text=f"{SECRET}: Bimbamjob invoices 2024 payments.")
        )
    profile = AgentProfile.objects.create(organisation=other, name="other-checker", instructions="Check.", tools=["kb"])
    return World(demo, other, get_user_model().objects.get(username="demo"), member, mallory, docs, profile)  # type: ignore[arg-type]


def signed_in(username: str, **kwargs: object) -> Client:
    client = Client(**kwargs)
    assert client.login(username=username, password="demo-password" if username == "demo" else f"{username}-password")
    return client
