"""The pages in the reader's words (issue 35): an edit form starts with the reader's words and keeps the data as it
was when they come back unchanged; error pages in the reader's language; settings name models and resources by
their names; prices and schedules in the reader's format."""

from __future__ import annotations

import html
from datetime import date

import pytest
from django.test import override_settings
from django.utils import translation

from assistant.budgets.models import Category
from assistant.chat.agent_views import report_markdown
from assistant.engine.outcomes import AgentReport
from assistant.knowledge.models import KnowledgeBase
from assistant.orgs.dates import long_date
from assistant.orgs.models import AgentProfile
from assistant.schedules.wording import schedule_words
from tests.orgs.orgs_support import World, signed_in

pytestmark = pytest.mark.django_db


def _page(response: object) -> str:
    return html.unescape(response.content.decode())  # type: ignore[attr-defined]


def test_a_base_s_form_shows_the_reader_s_words_and_keeps_the_data_when_they_come_back_unchanged(world: World) -> None:
    client = signed_in("demo", HTTP_ACCEPT_LANGUAGE="fr")
    page = _page(client.get("/kb/factures/edit"))
    assert 'value="Factures"' in page and "Factures émises aux entreprises clientes" in page
    assert "Invoices" not in page
    base = _page(client.get("/kb/factures/"))  # its table in words; its name in queries for the admins, as an id
    assert "une table de 20 lignes" in base and ">factures</code>" in base
    unchanged = {
        "name": "Factures",
        "description": "Factures émises aux entreprises clientes, avec le suivi des paiements.",
    }
    assert client.post("/kb/factures/edit", unchanged).status_code == 302
    kb = KnowledgeBase.objects.get(organisation=world.demo, slug="factures")
    assert (kb.name, kb.translations["fr"]["name"]) == ("Invoices", "Factures")
    with translation.override("en"):
        assert kb.shown_name == "Invoices"
    # Renamed in French: the new name as written, in every language.
    assert client.post("/kb/factures/edit", unchanged | {"name": "Factures clients"}).status_code == 302
    kb.refresh_from_db()
    assert kb.name == "Factures clients" and "name" not in kb.translations.get("fr", {})
    assert kb.translations["fr"]["description"].startswith("Factures émises")  # the field not renamed keeps its words


def test_a_category_s_name_field_shows_the_reader_s_words_and_saving_them_unchanged_keeps_the_name(
    world: World,
) -> None:
    client = signed_in("demo", HTTP_ACCEPT_LANGUAGE="fr")
    categories = list(Category.objects.filter(organisation=world.demo))
    french = {c.pk: c.translations["fr"]["name"] for c in categories}
    page = _page(client.get("/settings/budgets/"))
    for c in categories:
        assert f'value="{french[c.pk]}"' in page
        assert c.name == french[c.pk] or f'value="{c.name}"' not in page
    data: dict[str, object] = {"default": categories[0].pk}
    for c in categories:
        data |= {
            f"c{c.pk}-name": french[c.pk],
            f"c{c.pk}-monthly_tokens": c.monthly_tokens,
            f"c{c.pk}-alert_thresholds": "80, 100",
        }
    assert client.post("/settings/budgets/categories", data).status_code == 302
    for c in categories:
        again = Category.objects.get(pk=c.pk)
        assert (again.name, again.translations) == (c.name, c.translations)


@override_settings(DEBUG=False)
@pytest.mark.parametrize(
    ("language", "missing", "refused"),
    [("fr", "Page introuvable", "Accès refusé"), ("en", "Page not found", "Not allowed")],
)
def test_error_pages_are_the_app_s_in_the_reader_s_language(
    world: World, language: str, missing: str, refused: str
) -> None:
    page = signed_in("mia", HTTP_ACCEPT_LANGUAGE=language).get("/no-such-page/")
    assert page.status_code == 404
    assert f"<h1>{missing}</h1>" in _page(page) and 'class="brand"' in _page(page)
    page = signed_in("mia", HTTP_ACCEPT_LANGUAGE=language).get("/settings/")
    assert page.status_code == 403
    assert f"<h1>{refused}</h1>" in _page(page)


def test_settings_name_models_and_resources_by_their_names_and_prices_in_the_reader_s_format(world: World) -> None:
    AgentProfile.objects.create(
        organisation=world.demo, name="Checker", instructions="Check.", default_model="demo-small", tools=["kb", "web"]
    )
    page = _page(signed_in("demo", HTTP_ACCEPT_LANGUAGE="fr").get("/settings/"))
    assert "Demo Small (démo hors ligne) — 0,2 / 0,6 EUR (prix du 1er décembre 2025)" in page
    assert "Bases de connaissances, Web" in page and ">kb<" not in page
    allowed = page.split("Autorisés actuellement :")[1].split("</p>")[0]
    assert "Demo Large (démo hors ligne)" in allowed and "demo-large" not in allowed
    assert "(mcp:<nom>)" in page  # the placeholder shows, as text


@pytest.mark.parametrize(
    ("schedule", "en", "fr"),
    [
        ("0 7 * * 1", "Every Monday at 7 a.m.", "Chaque lundi à 07:00"),
        ("30 18 * * 1,4", "Every Monday and Thursday at 6:30 p.m.", "Chaque lundi et jeudi à 18:30"),
        ("0 7 * * 1-5", "Weekdays at 7 a.m.", "En semaine à 07:00"),
        ("0 6 * * *", "Every day at 6 a.m.", "Chaque jour à 06:00"),
        ("0 8 1 * *", "On day 1 of each month at 8 a.m.", "Le 1 de chaque mois à 08:00"),
        ("*/15 * * * *", None, None),
        ("0 7 * 1 1", None, None),
    ],
)
def test_a_schedule_is_said_in_words_where_it_is_a_common_one(schedule: str, en: str | None, fr: str | None) -> None:
    for language, words in (("en", en), ("fr", fr)):
        with translation.override(language):
            assert schedule_words(schedule) == words


def test_an_agent_s_gaps_follow_the_reader_s_typography() -> None:
    report = AgentReport(findings="Vu.", gaps=["rien sur « retards »", "rien sur « comptes »"]).as_text()
    with translation.override("fr"):
        assert report_markdown(report).endswith("Lacunes : rien sur « retards » ; rien sur « comptes »")
    with translation.override("en"):
        assert report_markdown(report).endswith("Gaps: rien sur « retards »; rien sur « comptes »")


def test_the_first_of_a_month_is_an_ordinal_in_french() -> None:
    with translation.override("fr"):
        assert (long_date(date(2025, 12, 1)), long_date(date(2025, 12, 2))) == ("1er décembre 2025", "2 décembre 2025")
    with translation.override("en"):
        assert long_date(date(2025, 12, 1)) == "1 December 2025"
