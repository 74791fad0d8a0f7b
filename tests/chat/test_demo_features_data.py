"""What load_demo adds for the demo's features (demo/management/demo_features.py): the Reports base, whose annual
report (French and English) is long enough to be read in four parts with its conclusions in the last one, and the
Vérificateur profile; loading twice changes nothing, and what an admin changed on the profile stays."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

from assistant.engine.tools import MAX_CHARS_PER_DOCUMENT
from assistant.knowledge.models import KnowledgeBase
from assistant.orgs.models import AgentProfile

pytestmark = pytest.mark.django_db


def test_the_reports_base_holds_the_annual_report_in_both_languages_in_four_parts() -> None:
    call_command("load_demo", verbosity=0)
    kb = KnowledgeBase.objects.get(organisation__slug="demo", slug="rapports")
    reports = {d.title: d.text for d in kb.documents.all()}
    assert set(reports) == {"Annual report 2024 — client portfolio", "Rapport annuel 2024 — portefeuille clients"}
    for title, text in reports.items():
        assert 3 * MAX_CHARS_PER_DOCUMENT < len(text) <= 4 * MAX_CHARS_PER_DOCUMENT, title
        conclusions = text.index("20. Conclusion")
        assert conclusions > 3 * MAX_CHARS_PER_DOCUMENT, title  # past what an agent reads at Approfondi


def test_the_checking_profile_is_loaded_once_and_an_admins_change_stays() -> None:
    call_command("load_demo", verbosity=0)
    profile = AgentProfile.objects.get(organisation__slug="demo", name="Vérificateur")
    assert profile.tools == ["kb"] and profile.default_model == "demo-small"
    profile.full_clean()
    profile.instructions = "Changed by an admin."
    profile.save()
    call_command("load_demo", verbosity=0)
    assert AgentProfile.objects.filter(organisation__slug="demo").count() == 1
    assert AgentProfile.objects.get(pk=profile.pk).instructions == "Changed by an admin."
    assert KnowledgeBase.objects.get(organisation__slug="demo", slug="rapports").documents.count() == 2


@pytest.mark.parametrize(
    ("language", "profile", "title"), [("en", "Checker", "Invoices 2024"), ("fr", "Vérificateur", "Factures 2024")]
)
def test_the_profile_and_the_table_s_title_are_shown_in_the_reader_s_language(
    language: str, profile: str, title: str
) -> None:
    """The model gives the profile's name as written («Vérificateur») and the sources carry the title as written;
    the conversation and its Markdown export word both in the reader's language."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from assistant.demo.management.commands.load_demo import TABLE_TITLE
    from assistant.knowledge.models import Document
    from assistant.runs.models import Conversation, Message, Run, Step

    call_command("load_demo", verbosity=0)
    call_command("load_demo", verbosity=0)  # twice: the same words
    user = get_user_model().objects.get(username="demo")
    table = Document.objects.get(knowledge_base__organisation__slug="demo", title=TABLE_TITLE)
    conversation = Conversation.objects.create(organisation=table.knowledge_base.organisation, user=user, title="t")
    source = {"id": table.public_id, "title": TABLE_TITLE, "kind": "document", "where": "factures"}
    run = Run.objects.create(
        conversation=conversation,
        organisation=conversation.organisation,
        user=user,
        model="demo-large",
        status="ok",
        answer="Done.",
        sources=[source],
    )
    Message.objects.create(conversation=conversation, role="user", content="Check it", run=run)
    started: dict[str, Any] = {
        "kind": "agent_started",
        "agent_id": "a1",
        "instruction": "Check.",
        "model": "demo-small",
    }
    started |= {"model_label": "Demo Small", "resources": ["kb:factures"], "max_rounds": 5}
    Step.objects.create(
        run=run, seq=1, kind="agent_started", agent_id="a1", data={**started, "profile": "Vérificateur"}
    )
    client = Client()
    assert client.login(username="demo", password="demo-password")
    client.post("/i18n/setlang/", {"language": language})
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert f'<dd class="profile">{profile}</dd>' in page
    assert f">{title} (export CSV" in page or f">{title} (CSV export" in page
    export = client.get(f"/c/{conversation.pk}/export.md").content.decode()
    assert f"- {title} (" in export
    kb_page = client.get("/kb/factures/").content.decode()
    assert title in kb_page
