"""The audit log: the admin changes of settings, API keys, budgets and knowledge bases are recorded (who,
when, what), and shown to the organisation's admins only, worded in the reader's language."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from assistant.budgets.models import Category
from assistant.knowledge.models import KnowledgeBase
from assistant.orgs import audit
from assistant.orgs.models import AgentProfile, ApiKey, AuditEntry
from tests.orgs.orgs_support import World, levels_post, signed_in

pytestmark = pytest.mark.django_db


def actions(world: World) -> list[tuple[str, str, str]]:
    return [(e.actor_name, e.action, e.target) for e in AuditEntry.objects.filter(organisation=world.demo)[::-1]]


def test_each_admin_change_makes_an_entry(world: World) -> None:
    admin = signed_in("demo")
    assert admin.post("/settings/models", {"restrict": "1", "models": ["demo-large"]}).status_code == 302
    assert admin.post("/settings/levels", levels_post(approfondi__agent_rounds=3)).status_code == 302
    profile = {"name": "verifier", "instructions": "Check.", "default_model": "demo-small", "tools": ["kb"]}
    assert admin.post("/settings/profiles/new", profile).status_code == 302
    verifier = AgentProfile.objects.get(organisation=world.demo, name="verifier")
    assert admin.post(f"/settings/profiles/{verifier.pk}/delete").status_code == 302
    admin.post("/settings/api-keys/new", {"name": "Zapier", "restrict": ""})
    key = ApiKey.objects.get(organisation=world.demo, name="Zapier")
    admin.post(f"/settings/api-keys/{key.pk}/rotate")
    admin.post(f"/settings/api-keys/{key.pk}/revoke")
    category = Category.objects.filter(organisation=world.demo).first()
    assert category is not None
    today = timezone.now().date() + timedelta(days=1)
    raised = {
        "raise-category": category.pk,
        "raise-tokens": 1000,
        "raise-reason": "Closing",
        "raise-ends_on": today.isoformat(),
    }
    assert admin.post("/settings/budgets/raises", raised).status_code == 302
    assert admin.post("/settings/budgets/time-zone", {"zone-time_zone": "Asia/Tokyo"}).status_code == 302
    assert admin.post("/kb/new", {"name": "Contracts", "slug": "contracts", "description": ""}).status_code == 302
    edit = {"name": "Signed contracts", "slug": "contracts", "description": ""}
    assert admin.post("/kb/contracts/edit", edit).status_code == 302
    assert admin.post("/kb/contracts/delete").status_code == 302
    assert [a for _who, a, _target in actions(world)] == [
        "models.saved",
        "levels.saved",
        "profile.created",
        "profile.deleted",
        "key.created",
        "key.rotated",
        "key.revoked",
        "budget.raised",
        "time_zone.saved",
        "kb.created",
        "kb.updated",
        "kb.deleted",
    ]
    assert {who for who, _a, _t in actions(world)} == {"demo"}
    entries = {e.action: e for e in AuditEntry.objects.filter(organisation=world.demo)}
    assert entries["models.saved"].details == {"allowed": ["demo-large"]}
    assert entries["levels.saved"].details == {"approfondi": {"agent_rounds": 3}}
    assert entries["budget.raised"].target == category.name
    assert entries["budget.raised"].details == {"tokens": 1000, "until": today.isoformat(), "reason": "Closing"}
    assert (
        entries["kb.updated"].target == "Signed contracts" and entries["kb.updated"].details["previous"] == "Contracts"
    )
    assert entries["key.created"].target.startswith(f"Zapier ({key.prefix}")
    assert not KnowledgeBase.objects.filter(organisation=world.demo, slug="contracts").exists()
    # Nothing was recorded in the other organisation.
    assert not AuditEntry.objects.filter(organisation=world.other).exists()


def test_a_refused_form_records_nothing(world: World) -> None:
    admin = signed_in("demo")
    assert admin.post("/settings/models", {"restrict": "1"}).status_code == 422
    assert admin.post("/settings/budgets/time-zone", {"zone-time_zone": "Mars/Olympus"}).status_code == 422
    assert not AuditEntry.objects.exists()


def test_the_page_is_for_this_organisations_admins_only(world: World) -> None:
    admin = signed_in("demo")
    admin.post("/settings/api-keys/new", {"name": "Zapier", "restrict": ""})
    assert 'href="/settings/audit/"' in admin.get("/settings/").content.decode()
    html = admin.get("/settings/audit/").content.decode()
    assert "created an API key" in html and "Zapier (sk-org-" in html and ">demo<" in html
    assert "models: the whole catalogue" in html and "expires: never" in html
    assert signed_in("mia").get("/settings/audit/").status_code == 403
    other = signed_in("mallory").get("/settings/audit/")
    assert other.status_code == 200 and "Zapier" not in other.content.decode()


def test_the_page_speaks_the_readers_language_and_is_paginated(world: World) -> None:
    for n in range(60):
        audit.record(world.admin, world.demo, "kb.created", f"Base {n}", slug=f"base-{n}")
    admin = signed_in("demo")
    first = admin.get("/settings/audit/").content.decode()
    assert "Base 59" in first and "Base 10" in first and "Base 9<" not in first
    assert "Page 1 of 2" in first and re.search(r'href="\?page=2"', first)
    second = admin.get("/settings/audit/?page=2").content.decode()
    assert "Base 9<" in second and "Base 59" not in second
    admin.cookies["django_language"] = "fr"
    french = admin.get("/settings/audit/").content.decode()
    assert "a créé une base de connaissances" in french and "Journal des modifications" in french
    assert "adresse: base-59" in french


def test_an_unknown_action_is_refused(world: World) -> None:
    with pytest.raises(ValueError, match="Unknown audit action"):
        audit.record(world.admin, world.demo, "key.stolen", "x")
