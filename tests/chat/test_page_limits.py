"""The pages' forms: a body over MAX_REQUEST_BODY_MB is refused next to the form (413), never a 500; the composer
marks the levels whose agent turn budget is 0, so that it says agents are off there."""

from __future__ import annotations

import pytest
from django.test import Client
from pytest_django import Settings

from assistant.orgs.models import Organisation, ReasoningLevel
from assistant.runs.models import Message, Run


@pytest.fixture
def client(demo_data: None, settings: Settings) -> Client:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 50_000
    client = Client()
    client.force_login(Organisation.objects.get(slug="demo").memberships.get().user)
    return client


def test_an_overlong_message_is_refused_next_to_the_form_with_htmx(client: Client) -> None:
    response = client.post("/c/new", {"text": "word " * 20_000, "model": "demo-large"}, headers={"HX-Request": "true"})
    assert response.status_code == 413
    assert response["HX-Retarget"] == "this" and response["HX-Reswap"] == "afterbegin"
    html = response.content.decode()
    assert 'class="error"' in html and "too long to send" in html and "<html" not in html
    assert not Run.objects.exists() and not Message.objects.exists()


def test_an_overlong_message_without_htmx_gets_a_short_page_in_french(client: Client) -> None:
    response = client.post("/c/new", {"text": "mot " * 20_000}, headers={"Accept-Language": "fr"})
    assert response.status_code == 413
    assert "trop long" in response.content.decode()


def test_a_form_with_too_many_fields_is_refused(client: Client) -> None:
    data = "&".join(f"f{i}=1" for i in range(1_200))
    response = client.post("/c/new", data, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400


def test_the_composer_marks_the_levels_without_agents(client: Client) -> None:
    html = client.get("/").content.decode()
    assert 'value="rapide" data-agents-off' in html and 'value="standard" data-agents-off' in html
    assert 'value="approfondi" selected>' in html and "agents-off-note" in html
    org = Organisation.objects.get(slug="demo")
    ReasoningLevel.objects.create(organisation=org, level="approfondi", effort="high", main_rounds=6, agent_rounds=0)
    assert 'value="approfondi" selected data-agents-off' in client.get("/").content.decode()
