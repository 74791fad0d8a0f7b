"""What load_demo adds for the demo's features (demo/management/demo_features.py): the Reports base, whose annual
report (French and English) is long enough to be read in four parts with its conclusions in the last one, and the
Vérificateur profile; loading twice changes nothing, and what an admin changed on the profile stays."""

from __future__ import annotations

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
